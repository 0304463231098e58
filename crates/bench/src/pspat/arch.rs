//! One measured run of one architecture: PSPAT, the locked scheduler (the
//! `tc` way) or no scheduler.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use hdrhistogram::Histogram;
use pktsched_core::{FlowId, Nanos, Pkt, Scheduler};
use pktsched_runtime::locked::Locked;
use pktsched_runtime::output::Output;
use pktsched_runtime::pspat::{ArbiterStats, Clock, Pspat, Stats, StopMode, Stopped};

use super::breakdown::{Breakdown, PartHists, Stamped, Stamps};
use super::load::{BenchOut, Gen, GenDone, generate, pin, sample};
use super::threads::{self, Snapshot, ThreadsWindow};
use super::{ArbiterWindow, Arch, HumbleRun, Phase, Plan, RunRes, Victim};
use crate::stats::jain;

/// Longest the main thread sleeps before it looks at the interrupt flag.
const NAP: Duration = Duration::from_millis(10);

/// Counters at both ends of the measured window.
struct Window {
    c0: Vec<u64>,
    c1: Vec<u64>,
    secs: f64,
    /// PSPAT: the arbiter's counters at both ends (as last published, at
    /// most a millisecond old).
    arbiter: Option<(ArbiterStats, ArbiterStats)>,
    /// PSPAT: the clients' mailbox-full counts at both ends.
    full: (u64, u64),
    /// The threads' scheduling counters at both ends (with `--stats`).
    threads: Option<(Snapshot, Snapshot)>,
}

/// What every architecture needs for one run.
struct Ctx<'a> {
    p: &'a Plan,
    ph: Phase,
    n: usize,
    flows: usize,
    len: u32,
    clock: Clock,
    victim: Option<u32>,
    from: Nanos,
    /// The victim's stamps (overload phase).
    stamps: Option<Arc<Stamps>>,
    /// Tells the generators to stop.
    stop: Arc<AtomicBool>,
    /// Set by a signal: end the window early.
    interrupt: &'a AtomicBool,
}

impl Ctx<'_> {
    fn out(&self) -> Result<BenchOut> {
        BenchOut::new(
            self.flows,
            self.clock,
            self.victim,
            self.from,
            self.stamps.as_ref(),
        )
    }

    /// The stamps the victim's generator takes as it hands its packets
    /// over (none for the others).
    fn stamps_for(&self, g: &Gen) -> Option<Arc<Stamps>> {
        self.stamps
            .clone()
            .filter(|_| Some(g.flow.0) == self.victim)
    }

    /// Sleeps `d`, or less if interrupted; whether it slept all of it.
    fn nap(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        loop {
            if self.interrupt.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            if now >= end {
                return true;
            }
            std::thread::sleep((end - now).min(NAP));
        }
    }

    /// Warm-up, then the measured window (cut short by an interrupt;
    /// `None` if interrupted during the warm-up); then stops the
    /// generators. `runtime` samples a PSPAT runtime's counters.
    fn measure(
        &self,
        outs: &[Arc<Vec<AtomicU64>>],
        runtime: impl Fn() -> Option<Stats>,
    ) -> Option<Window> {
        let w = self.nap(self.p.warmup).then(|| {
            let t0 = self.clock.now();
            let c0 = sample(outs, self.flows);
            let r0 = runtime();
            let counters = self.p.thread_counters;
            let s0 = counters.then(threads::snapshot);
            self.nap(self.p.duration);
            let t1 = self.clock.now();
            let c1 = sample(outs, self.flows);
            let r1 = runtime();
            let s1 = counters.then(threads::snapshot);
            let full = |r: &Option<Stats>| {
                r.as_ref()
                    .map_or(0, |s| s.clients.iter().map(|c| c.mailbox_full).sum())
            };
            Window {
                c0,
                c1,
                secs: (t1.0 - t0.0) as f64 / 1e9,
                full: (full(&r0), full(&r1)),
                threads: s0.zip(s1),
                arbiter: r0.zip(r1).map(|(a, b)| (a.arbiter, b.arbiter)),
            }
        });
        self.stop.store(true, Ordering::Relaxed);
        w
    }
}

/// The generators of a run: `n` clients (paced in proportion to their
/// weights under overload, greedy otherwise) and, under overload, the
/// victim.
fn generators(c: &Ctx<'_>, arch: Arch, weights: &[u32]) -> Vec<Gen> {
    let p = c.p;
    let (len, link) = p.flow_shape(c.ph);
    // Offered load f × link, split in proportion to the weights, so that
    // with f > 1 every client is backlogged and its share is its weight's.
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let pps_of = |i: usize| match (c.ph, p.overload) {
        (Phase::Overload, Some(f)) => {
            Some(link.as_bps() as f64 * f * f64::from(weights[i]) / wsum / (f64::from(len) * 8.0))
        }
        _ => None,
    };
    let mut gens: Vec<Gen> = (0..c.n)
        .map(|i| Gen {
            flow: FlowId(i as u32),
            len,
            batch: p.batch,
            pps: pps_of(i),
            burst: 256,
            stamp: false,
            alone: c.n == 1 && c.ph == Phase::Throughput,
            poll_idle: p.client_transmit,
        })
        .collect();
    if c.ph == Phase::Overload {
        gens.push(Gen {
            flow: FlowId(c.n as u32),
            len,
            batch: 1,
            pps: Some(p.victim_rate.as_bps().max(1) as f64 / (f64::from(len) * 8.0)),
            burst: 1,
            stamp: true,
            alone: false,
            // PSPAT: between packets the victim polls (an empty batch), so
            // it runs the round a late arbiter owes its last packet.
            poll_idle: p.client_transmit || arch == Arch::Pspat,
        });
    }
    gens
}

type Sched = Box<dyn Scheduler<u64> + Send>;

/// The victim's latency as the outputs saw it.
struct Latency {
    hist: Histogram<u64>,
    parts: Option<PartHists>,
}

impl Latency {
    /// The sum of `outs`' histograms.
    fn of<'a>(outs: impl IntoIterator<Item = &'a BenchOut>) -> Result<Latency> {
        let mut hist = Histogram::<u64>::new(3).map_err(|e| anyhow!("{e}"))?;
        let mut parts: Option<PartHists> = None;
        for o in outs {
            hist.add(&o.hist).map_err(|e| anyhow!("{e}"))?;
            if let Some(p) = &o.parts {
                match &mut parts {
                    Some(all) => all.add(p)?,
                    None => {
                        let mut all = PartHists::new(p.stamps.clone())?;
                        all.add(p)?;
                        parts = Some(all);
                    }
                }
            }
        }
        Ok(Latency { hist, parts })
    }

    fn breakdown(&self) -> Option<Breakdown> {
        self.parts.as_ref().map(PartHists::summary)
    }
}

fn joined<T>(h: std::thread::JoinHandle<T>) -> Result<T> {
    h.join().map_err(|_| anyhow!("client thread panicked"))
}

/// Starts generator `g`'s thread, named after its role (the victim's or
/// a client's; see `threads`).
fn spawn_named<R: Send + 'static>(
    g: &Gen,
    victim: Option<u32>,
    f: impl FnOnce() -> R + Send + 'static,
) -> Result<std::thread::JoinHandle<R>> {
    let name = if victim == Some(g.flow.0) {
        threads::VICTIM_NAME
    } else {
        threads::CLIENT_NAME
    };
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| anyhow!("starting generator thread `{name}`: {e}"))
}

/// Starts a generator thread that hands each batch straight to
/// `send(&mut sink, batch)` (which empties it); the thread returns what
/// the generator did and the sink.
fn spawn_direct<S: Send + 'static>(
    c: &Ctx<'_>,
    g: Gen,
    mut sink: S,
    send: fn(&mut S, &mut Vec<Pkt<u64>>),
) -> Result<std::thread::JoinHandle<(GenDone, S)>> {
    let (stop, clock) = (c.stop.clone(), c.clock);
    let stamps = c.stamps_for(&g);
    let core = c.p.placement.client_core(g.flow.index(), c.p.cores);
    spawn_named(&g, c.victim, move || {
        pin(core);
        let mut scratch = Vec::with_capacity(g.batch);
        let done = generate(g, &stop, clock, |q| {
            let k = q.len();
            if let Some(s) = &stamps {
                q.iter().for_each(|p| s.stamp(p.item, 0));
            }
            scratch.extend(q.drain(..));
            send(&mut sink, &mut scratch);
            Some(k)
        });
        (done, sink)
    })
}

/// PSPAT: clients post into mailboxes, the arbiter schedules.
fn run_pspat(
    c: &Ctx<'_>,
    gens: Vec<Gen>,
    sched: Sched,
    res: &mut RunRes,
) -> Result<(Option<Window>, Latency)> {
    let cfg = c.p.config(c.ph);
    let ct = cfg.client_transmit;
    let mut outs = Vec::new();
    let mut counters = Vec::new();
    for _ in 0..if ct { 0 } else { cfg.dispatchers.max(1) } {
        let o = c.out()?;
        counters.push(o.counts.clone());
        outs.push(o);
    }
    let rt = Pspat::start(&cfg, sched, outs, c.clock).map_err(|e| anyhow!("{e}"))?;
    let rt_stats = || Some(rt.stats());
    let mut handles = Vec::new();
    for g in gens {
        let mut cl = rt.client().map_err(|e| anyhow!("{e}"))?;
        if let Some(after) = c.p.victim_assist_after
            && c.victim == Some(g.flow.0)
            && !cl.set_assist_after(after)
        {
            bail!("the PSPAT runtime refused the victim's hand-off (--victim-assist-after)");
        }
        // Client-transmit: each client has its own output.
        let mut out = if ct {
            let o = c.out()?;
            counters.push(o.counts.clone());
            Some(o)
        } else {
            None
        };
        let (stop, clock) = (c.stop.clone(), c.clock);
        let stamps = c.stamps_for(&g);
        let client_core = c.p.placement.client_core(g.flow.index(), c.p.cores);
        handles.push(spawn_named(&g, c.victim, move || {
            pin(client_core);
            let mut cleared = Vec::new();
            let done = generate(g, &stop, clock, |q| {
                if let Some(s) = &stamps {
                    q.iter().for_each(|p| s.stamp(p.item, 0));
                }
                let r = match cl.send_batch(q) {
                    Ok((k, _)) => Some(k),
                    Err(Stopped) => None,
                };
                if let Some(o) = out.as_mut()
                    && cl.take_cleared(&mut cleared) > 0
                {
                    o.transmit(&mut cleared);
                }
                r
            });
            (done, cl, out)
        })?);
    }
    let w = c.measure(&counters, rt_stats);
    let h = rt.humble_stats();
    res.humble = h.armed.then_some(HumbleRun {
        periods: h.periods,
        kept: h.kept,
        humble_ms: h.humble_ns as f64 / 1e6,
        lowered: h.lowered,
    });
    let mut done = Vec::new();
    for h in handles {
        done.push(joined(h)?);
    }
    let r = rt.stop(StopMode::Return).map_err(|e| anyhow!("{e}"))?;
    // Client-transmit: what is left in the return mailboxes.
    let mut client_outs = Vec::new();
    for (_, cl, out) in &mut done {
        if let Some(o) = out.as_mut() {
            let mut cleared = Vec::new();
            cl.take_cleared(&mut cleared);
            o.transmit(&mut cleared);
        }
        if let Some(o) = out.take() {
            client_outs.push(o);
        }
    }
    res.sent = done.iter().map(|d| d.0.sent).sum();
    res.delivered = r.arbiter.decisions + r.flushed - r.returned_cleared;
    res.dropped = r.arbiter.dropped;
    res.returned = r.returned.len() as u64;
    res.mailbox_full = r.clients.iter().map(|c| c.mailbox_full).sum();
    res.backpressure_events = r.clients.iter().map(|c| c.backpressure_events).sum();
    res.arbiter_avg_loop_ns = r.arbiter.avg_loop_ns();
    res.arbiter_max_loop_ns = r.arbiter.max_loop_ns;
    res.arbiter_p99_loop_ns = r.arbiter.loop_ns_quantile(0.99);
    res.arbiter_pkts_per_loop = r.arbiter.pkts_per_loop();
    res.arbiter_sleeps = r.arbiter.sleeps;
    res.assisted_rounds = r.arbiter.assisted_rounds;
    res.tc = Some(r.tc_style(c.p.alg.name()));
    let lat = Latency::of(r.outputs.iter().chain(&client_outs))?;
    let out_total: u64 = r
        .outputs
        .iter()
        .chain(&client_outs)
        .flat_map(|o| o.local.iter())
        .sum();
    if out_total != res.delivered {
        bail!(
            "pspat lost track of packets: {} cleared and not handed back, but outputs saw {out_total}",
            res.delivered
        );
    }
    Ok((w, lat))
}

/// The `tc` way: every client locks the one scheduler itself.
fn run_locked(
    c: &Ctx<'_>,
    gens: Vec<Gen>,
    sched: Sched,
    res: &mut RunRes,
) -> Result<(Option<Window>, Latency)> {
    let cfg = c.p.config(c.ph);
    let out = c.out()?;
    let counters = vec![out.counts.clone()];
    let lk = Locked::new(&cfg, sched, out, c.clock).map_err(|e| anyhow!("{e}"))?;
    let handles: Vec<_> = gens
        .into_iter()
        .map(|g| {
            spawn_direct(c, g, lk.client(), |cl, b| {
                cl.send_batch(b);
            })
        })
        .collect::<Result<_>>()?;
    let w = c.measure(&counters, || None);
    // The clients end here: the scheduler stops only once they are gone.
    let done: Vec<(GenDone, u64)> = handles
        .into_iter()
        .map(|h| joined(h).map(|(d, cl)| (d, cl.contended)))
        .collect::<Result<_>>()?;
    let r = lk.stop(StopMode::Return).map_err(|e| anyhow!("{e}"))?;
    res.sent = done.iter().map(|d| d.0.sent).sum();
    res.lock_contended = done.iter().map(|d| d.1).sum();
    res.delivered = r.decisions + r.flushed;
    res.dropped = r.dropped.iter().map(|d| d.iter().sum::<u64>()).sum();
    res.returned = r.returned.len() as u64;
    Ok((w, Latency::of([&r.output])?))
}

/// No scheduler: each client transmits straight into its own output.
fn run_none(c: &Ctx<'_>, gens: Vec<Gen>, res: &mut RunRes) -> Result<(Option<Window>, Latency)> {
    let mut counters = Vec::new();
    let mut handles = Vec::new();
    for g in gens {
        let out = c.out()?;
        counters.push(out.counts.clone());
        handles.push(spawn_direct(c, g, out, |o, b| o.transmit(b))?);
    }
    let w = c.measure(&counters, || None);
    let mut outs = Vec::new();
    for t in handles {
        let (d, out) = joined(t)?;
        res.sent += d.sent;
        outs.push(out);
    }
    res.delivered = res.sent;
    Ok((w, Latency::of(&outs)?))
}

/// Jain's index of throughput/weight and the largest |share/expected − 1|
/// over the clients.
fn jain_and_err(counts: &[u64], weights: &[u32]) -> (f64, f64) {
    let x: Vec<f64> = counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| c as f64 / f64::from(w))
        .collect();
    let total: f64 = counts.iter().map(|&c| c as f64).sum();
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let err = counts
        .iter()
        .zip(weights)
        .map(|(&c, &w)| {
            let share = c as f64 / total.max(1.0);
            let want = f64::from(w) / wsum;
            (share / want - 1.0).abs()
        })
        .fold(0.0, f64::max);
    (jain(&x).unwrap_or(f64::NAN), err)
}

/// The victim's latency percentiles and its QFQ bound; `None` when no
/// victim packet came out in the measured window (a starved victim has
/// no percentiles: an empty histogram's would read 0 and pass every
/// target).
fn victim(
    c: &Ctx<'_>,
    weights: &[u32],
    arch: Arch,
    p99_loop: u64,
    lat: &Latency,
) -> Option<Victim> {
    let p = c.p;
    let (len, link) = p.flow_shape(c.ph);
    let wsum: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let phi = f64::from(p.victim_weight) / (wsum + f64::from(p.victim_weight));
    let l_over_r = f64::from(len) * 8e9 / link.as_bps().max(1) as f64;
    // Own packet at the guaranteed rate + QFQ's T-WFI (3·σ_k + 2·L)/R
    // (all packets the same length) + Δ_A.
    // Δ_A for PSPAT: a packet may arrive just after its mailbox was
    // read, wait out the read (or scan) interval and the round in
    // progress, then the round that releases it: the interval plus two
    // rounds, taken at their 99th percentile.
    let delta_a = if arch == Arch::Pspat {
        p.scan_interval.max(p.read_interval).as_nanos() as f64 + 2.0 * p99_loop as f64
    } else {
        0.0
    };
    let wsum_total =
        weights.iter().map(|&w| u64::from(w)).sum::<u64>() + u64::from(p.victim_weight);
    let twfi_ns = pktsched_sim::metrics::qfq_twfi_ps(
        p.victim_weight,
        len,
        wsum_total,
        len,
        link.as_bps().max(1),
    ) / 1000.0;
    let bound = l_over_r / phi + twfi_ns + delta_a;
    victim_of(&lat.hist, bound.ceil() as u64, lat.breakdown())
}

/// The victim's percentiles from its latency histogram, with its bound
/// and breakdown; `None` when the histogram is empty.
fn victim_of(hist: &Histogram<u64>, bound_ns: u64, breakdown: Option<Breakdown>) -> Option<Victim> {
    if hist.is_empty() {
        return None;
    }
    let q = |x: f64| hist.value_at_quantile(x);
    Some(Victim {
        samples: hist.len(),
        p50_ns: q(0.5),
        p90_ns: q(0.9),
        p99_ns: q(0.99),
        p999_ns: q(0.999),
        max_ns: hist.max(),
        bound_ns,
        breakdown,
    })
}

/// `--busy-core`: a thread that spins on one core (another process's
/// work) until stopped.
struct BusyCore {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<()>,
}

impl BusyCore {
    fn start(core: usize) -> Result<BusyCore> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name(threads::BUSY_NAME.into())
            .spawn(move || {
                pin(Some(core));
                while !flag.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
            .map_err(|e| anyhow!("starting the --busy-core thread: {e}"))?;
        Ok(BusyCore { stop, handle })
    }

    fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle
            .join()
            .map_err(|_| anyhow!("the --busy-core thread panicked"))
    }
}

/// One measured run of one architecture; `None` when `interrupt` was set
/// before the measured window began.
pub(super) fn run_one(
    p: &Plan,
    ph: Phase,
    arch: Arch,
    n: usize,
    run: usize,
    interrupt: &AtomicBool,
) -> Result<Option<RunRes>> {
    let (len, _) = p.flow_shape(ph);
    let clock = Clock::new();
    let c = Ctx {
        p,
        ph,
        n,
        flows: n + usize::from(ph == Phase::Overload),
        len,
        clock,
        victim: (ph == Phase::Overload).then_some(n as u32),
        stamps: (ph == Phase::Overload).then(|| Stamps::new(clock)),
        from: Nanos(u64::try_from(p.warmup.as_nanos()).unwrap_or(u64::MAX)),
        stop: Arc::new(AtomicBool::new(false)),
        interrupt,
    };
    let weights: Vec<u32> = (0..n).map(|i| p.weights[i % p.weights.len()]).collect();
    let gens = generators(&c, arch, &weights);
    let mut sched = p.alg.build_send::<u64>();
    p.add_flows(sched.as_mut(), n, ph)
        .map_err(|e| anyhow!("flows: {e}"))?;
    if let (Some(v), Some(s)) = (c.victim, &c.stamps) {
        sched = Box::new(Stamped::new(sched, FlowId(v), s.clone()));
    }
    let mut res = RunRes {
        phase: ph.name().to_string(),
        arch: arch.name().to_string(),
        clients: n,
        run,
        ..RunRes::default()
    };
    let busy = p.busy_core.map(BusyCore::start).transpose()?;
    let ran = match arch {
        Arch::Pspat => run_pspat(&c, gens, sched, &mut res),
        Arch::Locked => run_locked(&c, gens, sched, &mut res),
        Arch::None => run_none(&c, gens, &mut res),
    };
    if let Some(b) = busy {
        b.stop()?;
    }
    let (w, lat) = ran?;
    // Nothing lost: every packet handed over was delivered, dropped with a
    // reason, or handed back at stop.
    if res.sent != res.delivered + res.dropped + res.returned {
        bail!(
            "{arch:?}: accounting mismatch: sent {} != delivered {} + dropped {} + returned {}",
            res.sent,
            res.delivered,
            res.dropped,
            res.returned
        );
    }
    let Some(w) = w else { return Ok(None) };
    let window: Vec<u64> = w.c1.iter().zip(&w.c0).map(|(b, a)| b - a).collect();
    let total: u64 = window.iter().sum();
    res.decisions_per_s = total as f64 / w.secs.max(1e-9);
    res.gbit_per_s = res.decisions_per_s * f64::from(c.len) * 8.0 / 1e9;
    (res.jain, res.max_share_err) = jain_and_err(&window[..n], &weights);
    res.threads = w
        .threads
        .as_ref()
        .map(|(a, b)| ThreadsWindow::between(a, b, w.secs));
    if let Some((a, b)) = &w.arbiter {
        res.window = Some(ArbiterWindow::between(a, b, w.secs, w.full));
    }
    if ph == Phase::Overload {
        res.victim = victim(&c, &weights, arch, res.arbiter_p99_loop_ns, &lat);
    }
    Ok(Some(res))
}

#[cfg(test)]
mod tests {
    use hdrhistogram::Histogram;

    use super::victim_of;

    #[test]
    fn a_victim_with_no_samples_has_no_percentiles() {
        let empty = Histogram::<u64>::new(3).unwrap();
        // An empty histogram reads 0 at every quantile, which would pass
        // every target: a starved victim is `None` instead.
        assert_eq!(empty.value_at_quantile(0.99), 0);
        assert!(victim_of(&empty, 1_000, None).is_none());
        let mut hist = Histogram::<u64>::new(3).unwrap();
        // Values below 2048 ns are exact at 3 significant digits.
        for ns in 1..=100 {
            hist.record(ns * 10).unwrap();
        }
        let v = victim_of(&hist, 1_000, None).expect("100 samples");
        assert_eq!(
            (v.samples, v.p99_ns, v.max_ns, v.bound_ns),
            (100, 990, 1_000, 1_000)
        );
    }
}
