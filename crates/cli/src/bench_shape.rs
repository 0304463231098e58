//! `pktsched bench shape`: closed-loop EDT shaping benchmark, structures
//! side by side in one run.

use std::time::Instant;

use std::io::Write;

use anyhow::{Result, anyhow, bail};
use pktsched_core::shape::{CffsShaper, Shaper, TimeQueue, WheelConfig, Wheels};
use pktsched_core::{FlowConfig, Nanos, Pkt, Rate, Scheduler};

/// Arguments of `bench shape`.
#[derive(Debug, clap::Args)]
pub(crate) struct ShapeArgs {
    /// Numbers of flows, comma separated.
    #[arg(long, default_value = "1,4,16,1000,100000")]
    flows: String,
    /// Per-flow rates, comma separated, cycled over the flows.
    #[arg(long, default_value = "10gbit")]
    rate: String,
    /// Packet length in bytes.
    #[arg(long, default_value_t = 1500)]
    len: u32,
    /// Packets released per run (per flow count and structure).
    #[arg(short = 'n', long, default_value_t = 2_000_000)]
    pkts: u64,
    /// Packets each flow keeps queued in the shaper.
    #[arg(long, default_value_t = 4)]
    outstanding: u64,
    /// Slot width of the single wheel and the cFFS, ns (power of two).
    #[arg(long, default_value_t = 64)]
    gran: u64,
    /// Finest slot of the MLTW, ns (power of two).
    #[arg(long, default_value_t = 1)]
    mltw_gran: u64,
    /// Memory cap for each structure's tables, bytes.
    #[arg(long, default_value_t = 1 << 30)]
    max_memory: usize,
    /// Start each flow at a pseudo-random phase within its first packet gap
    /// (seeded, deterministic) instead of all at t = 0, so flows are not
    /// synchronised: the case where batching across flows is hard.
    #[arg(long)]
    stagger: bool,
    /// Structures: mltw, wheel, cffs.
    #[arg(long, default_value = "mltw,wheel,cffs")]
    structs: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw `PREFIX-ns.svg` (ns per packet vs flows) and
    /// `PREFIX-wakeups.svg` (wake-ups per second vs flows), one line per
    /// structure.
    #[arg(long, value_name = "PREFIX")]
    plot: Option<String>,
}

#[derive(Debug, serde::Serialize)]
struct Res {
    structure: &'static str,
    flows: usize,
    pkts: u64,
    ns_per_pkt: f64,
    cpu_ns_per_pkt: Option<f64>,
    rate_err_max: f64,
    rate_err_median: f64,
    max_burst_bytes: u64,
    wakeups: u64,
    wakeups_per_sec: f64,
    max_batch: u64,
    batches_log2: Vec<u64>,
    max_lateness_ns: u64,
    memory_bytes: usize,
}

/// A fixed, well-mixed hash of `x` (SplitMix64's finaliser): the flows'
/// start phases, reproducible without a random-number dependency.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn run_one<Q: TimeQueue>(q: Q, a: &ShapeArgs, n: usize, rates: &[u64]) -> Result<Res> {
    let mut sh: Shaper<Q, u64> = Shaper::new(q, Rate::gbit(1));
    let mut flows = Vec::with_capacity(n);
    for i in 0..n {
        let cfg = FlowConfig::default().with_max_len(a.len.max(64));
        flows.push(
            sh.add_flow_bps(cfg, rates[i % rates.len()])
                .map_err(|e| anyhow!("{e}"))?,
        );
    }
    let per_flow = (a.pkts / n as u64).max(a.outstanding + 2);
    /// The loop's own per-flow bookkeeping, in one cache line per flow so
    /// that it adds as little as possible to the shaper's cost.
    #[derive(Clone, Copy)]
    struct Track {
        sent: u64,
        first: u64,
        last: u64,
        bytes: u64,
        cnt: u64,
        burst_t: u64,
        burst: u64,
    }
    let mut tr = vec![
        Track {
            sent: 0,
            first: 0,
            last: 0,
            bytes: 0,
            cnt: 0,
            burst_t: u64::MAX,
            burst: 0,
        };
        n
    ];
    let mut max_burst = 0u64;
    // Start times: all 0, or (--stagger) a fixed pseudo-random phase within
    // each flow's first packet gap, enqueued in time order.
    let mut starts: Vec<(u64, usize)> = (0..n)
        .map(|i| {
            let gap = Rate::bps(rates[i % rates.len()])
                .tx_time(u64::from(a.len))
                .0;
            let phase = if a.stagger {
                splitmix64(i as u64) % gap.max(1)
            } else {
                0
            };
            (phase, i)
        })
        .collect();
    starts.sort_unstable();
    for &(t, i) in &starts {
        for _ in 0..a.outstanding {
            sh.enqueue(Pkt::new(flows[i], a.len, Nanos(t), i as u64), Nanos(t))
                .map_err(|r| anyhow!("enqueue refused: {}", r.reason))?;
            tr[i].sent += 1;
        }
    }
    let cpu0 = pktsched_sim::thread_cpu_ns();
    let t0 = Instant::now();
    let mut now = Nanos(starts.last().map_or(0, |s| s.0));
    let mut released = 0u64;
    while let Some(t) = sh.next_ready(now) {
        now = t;
        while let Some(p) = sh.dequeue(now) {
            released += 1;
            let i = p.item as usize;
            let t = &mut tr[i];
            if t.cnt == 0 {
                t.first = now.0;
            } else {
                t.bytes += u64::from(p.len);
            }
            t.cnt += 1;
            t.last = now.0;
            if t.burst_t == now.0 {
                t.burst += u64::from(p.len);
            } else {
                t.burst_t = now.0;
                t.burst = u64::from(p.len);
            }
            max_burst = max_burst.max(t.burst);
            if t.sent < per_flow {
                t.sent += 1;
                let _ = sh.enqueue(Pkt::new(p.flow, a.len, now, i as u64), now);
            }
        }
    }
    let wall = t0.elapsed().as_nanos() as f64;
    let cpu = pktsched_sim::thread_cpu_ns()
        .zip(cpu0)
        .map(|(b, a)| (b - a) as f64);
    let mut errs: Vec<f64> = (0..n)
        .filter(|&i| tr[i].last > tr[i].first)
        .map(|i| {
            let bps = rates[i % rates.len()] as f64;
            let got = tr[i].bytes as f64 * 8e9 / (tr[i].last - tr[i].first) as f64;
            (got - bps).abs() / bps
        })
        .collect();
    errs.sort_by(f64::total_cmp);
    let st = *sh.shape_stats();
    let hist_len = st.batches.iter().rposition(|&b| b > 0).map_or(0, |p| p + 1);
    Ok(Res {
        structure: sh.name(),
        flows: n,
        pkts: released,
        ns_per_pkt: wall / released.max(1) as f64,
        cpu_ns_per_pkt: cpu.map(|c| c / released.max(1) as f64),
        rate_err_max: errs.last().copied().unwrap_or(0.0),
        rate_err_median: errs.get(errs.len() / 2).copied().unwrap_or(0.0),
        max_burst_bytes: max_burst,
        wakeups: st.wakeups,
        wakeups_per_sec: st.wakeups as f64 * 1e9 / now.0.max(1) as f64,
        max_batch: st.max_batch,
        batches_log2: st.batches[..hist_len].to_vec(),
        max_lateness_ns: st.max_lateness,
        memory_bytes: sh.memory_bytes(),
    })
}

pub(crate) fn run(a: &ShapeArgs, o: &mut crate::output::Stdout) -> Result<()> {
    let rates: Vec<u64> = a
        .rate
        .split(',')
        .map(|s| {
            Rate::parse(s.trim())
                .map(|r| r.as_bps())
                .map_err(|e| anyhow!("--rate: {e}"))
        })
        .collect::<Result<_>>()?;
    let flows: Vec<usize> = crate::args::counts("flows", &a.flows, 1, MAX_FLOWS)?
        .into_iter()
        .map(|n| n as usize)
        .collect();
    crate::args::within("len", u64::from(a.len), 64, 65535)?;
    crate::args::within("pkts", a.pkts, 1, MAX_PKTS)?;
    crate::args::within("outstanding", a.outstanding, 1, MAX_OUTSTANDING)?;
    crate::args::within("max-memory", a.max_memory as u64, 1 << 20, 1 << 34)?;
    for (flag, g) in [("gran", a.gran), ("mltw-gran", a.mltw_gran)] {
        if !g.is_power_of_two() || g > 1 << 30 {
            bail!("--{flag} {g}: allowed a power of two 1..=1073741824 (ns)");
        }
    }
    let most = flows.iter().copied().max().unwrap_or(1) as u64;
    if most * a.outstanding > MAX_QUEUED {
        bail!(
            "--flows {most} × --outstanding {} = {} packets queued at once: allowed at most \
             {MAX_QUEUED} (memory)",
            a.outstanding,
            most * a.outstanding
        );
    }
    let slowest = rates.iter().copied().min().unwrap_or(1);
    // Horizon: the outstanding packets of the slowest flow, twice over.
    let spacing = Rate::bps(slowest).tx_time(u64::from(a.len)).0;
    let horizon = Nanos(spacing.saturating_mul(2 * (a.outstanding + 1)));
    // The MLTW needs a wheel whose slot matches the slowest flow's
    // MTU/rate (FlowBundler's level choice); with only the levels the
    // horizon asks for, slow flows would all land on the top (too fine)
    // wheel and nothing would batch. Its own wheel then reaches 1024
    // packets of that flow ahead.
    let mltw_horizon = Nanos(horizon.0.max(spacing.saturating_mul(1024)));
    let mut out = Vec::new();
    let mut skipped: Vec<Skipped> = Vec::new();
    pktsched_runtime::signal::install()?;
    let stop = pktsched_runtime::signal::stop_flag();
    let rows = flows.len() * a.structs.split(',').count();
    'all: for &n in &flows {
        for s in a.structs.split(',') {
            // A signal stops at the next row: what was measured is printed.
            if stop.load(std::sync::atomic::Ordering::Acquire) {
                break 'all;
            }
            let r = match s.trim() {
                "mltw" => Wheels::new(
                    WheelConfig::mltw(a.mltw_gran, 1024, mltw_horizon).max_memory(a.max_memory),
                )
                .map_err(|e| anyhow!("{e}"))
                .and_then(|q| run_one(q, a, n, &rates)),
                "wheel" => {
                    Wheels::new(WheelConfig::single(a.gran, horizon).max_memory(a.max_memory))
                        .map_err(|e| anyhow!("{e}"))
                        .and_then(|q| run_one(q, a, n, &rates))
                }
                "cffs" => CffsShaper::new(a.gran, horizon, a.max_memory)
                    .map_err(|e| anyhow!("{e}"))
                    .and_then(|q| run_one(q, a, n, &rates)),
                other => {
                    return Err(anyhow!(
                        "unknown structure `{other}`; allowed: mltw, wheel, cffs"
                    ));
                }
            };
            match r {
                Ok(r) => out.push(r),
                Err(e) => {
                    eprintln!("{s} at {n} flows: skipped: {e}");
                    skipped.push(Skipped {
                        structure: s.trim().to_string(),
                        flows: n,
                        skipped: e.to_string(),
                    });
                }
            }
        }
    }
    crate::partial::note(out.len() + skipped.len(), rows, "rows");
    if let Some(prefix) = &a.plot {
        let files = plot(prefix, a, &out)?;
        for f in files {
            eprintln!("wrote {f}");
        }
    }
    if a.json {
        let mut rows: Vec<serde_json::Value> = out
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        for s in &skipped {
            rows.push(serde_json::to_value(s)?);
        }
        writeln!(o, "{}", serde_json::to_string_pretty(&rows)?)?;
        crate::partial::finish(o)?;
        return incomplete(&skipped);
    }
    writeln!(
        o,
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
    for r in &out {
        writeln!(
            o,
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
    crate::partial::finish(o)?;
    incomplete(&skipped)
}

/// A row that could not be measured, with the reason.
#[derive(Debug, serde::Serialize)]
struct Skipped {
    structure: String,
    flows: usize,
    skipped: String,
}

/// Most flows of one run (each flow keeps its shaper state and the loop's
/// bookkeeping: ~200 bytes).
const MAX_FLOWS: u64 = 1_000_000;
/// Most packets per run (a few seconds per structure).
const MAX_PKTS: u64 = 100_000_000;
/// Most packets one flow keeps queued.
const MAX_OUTSTANDING: u64 = 1024;
/// Most packets queued at once over all flows.
const MAX_QUEUED: u64 = 4_000_000;

/// Fails (after the table was printed) when some rows are missing.
fn incomplete(skipped: &[Skipped]) -> Result<()> {
    if skipped.is_empty() {
        return Ok(());
    }
    let rows: Vec<String> = skipped
        .iter()
        .map(|s| format!("{} at {} flows: {}", s.structure, s.flows, s.skipped))
        .collect();
    bail!(
        "{} of the requested rows could not be measured: {}",
        skipped.len(),
        rows.join("; ")
    )
}

/// The two SVGs of `--plot`: ns per packet and wake-ups per second against
/// the number of flows, one line per structure.
fn plot(prefix: &str, a: &ShapeArgs, out: &[Res]) -> Result<Vec<String>> {
    let mut structs: Vec<&str> = Vec::new();
    for r in out {
        if !structs.contains(&r.structure) {
            structs.push(r.structure);
        }
    }
    let series = |y: &dyn Fn(&Res) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        structs
            .iter()
            .map(|s| {
                let pts = out
                    .iter()
                    .filter(|r| r.structure == *s)
                    .map(|r| (r.flows as f64, y(r)))
                    .collect();
                (s.to_string(), pts)
            })
            .collect()
    };
    let how = format!(
        "{} B packets at {}{}",
        a.len,
        a.rate,
        if a.stagger {
            ", staggered"
        } else {
            ", in phase"
        }
    );
    let ns = format!("{prefix}-ns.svg");
    crate::svg::Chart {
        title: format!("shaping cost per packet ({how})"),
        x_desc: "flows",
        y_desc: "ns per packet (enqueue + dequeue)",
        log_x: true,
        series: series(&|r| r.ns_per_pkt),
    }
    .draw(std::path::Path::new(&ns))?;
    let wk = format!("{prefix}-wakeups.svg");
    crate::svg::Chart {
        title: format!("wake-ups per second of virtual time ({how})"),
        x_desc: "flows",
        y_desc: "wake-ups / s",
        log_x: true,
        series: series(&|r| r.wakeups_per_sec),
    }
    .draw(std::path::Path::new(&wk))?;
    Ok(vec![ns, wk])
}
