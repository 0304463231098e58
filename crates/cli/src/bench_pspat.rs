//! `pktsched bench pspat`: the PSPAT runtime against the `tc` architecture
//! (one locked scheduler that every client runs itself) and no scheduler
//! at all, side by side in one invocation.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use pktsched_bench::pspat::{self, Plan, PspatOptions};

use crate::output::Stdout;

/// Arguments of `bench pspat`.
#[derive(Debug, clap::Args)]
pub(crate) struct PspatArgs {
    /// Numbers of (non-victim) clients, comma separated (1..=128).
    #[arg(long, default_value = "1,2,4,8,16,32,64,128")]
    clients: String,
    /// Architectures: pspat, locked (the tc way), none (no scheduler).
    #[arg(long, default_value = "pspat,locked,none")]
    archs: String,
    /// Phases: throughput, overload.
    #[arg(long, default_value = "throughput,overload")]
    phases: String,
    /// Scheduling algorithm (fifo, prio, rr, drr, wf2q, qfq).
    #[arg(long, default_value = "qfq")]
    alg: String,
    /// Weights of the clients' flows, comma separated, cycled.
    #[arg(long, default_value = "1")]
    weights: String,
    /// Packets a client hands over at once (one lock, or one mailbox
    /// handshake, per batch); 1 is how `tc` works: one lock per packet.
    #[arg(long, default_value = "1")]
    batch: String,
    /// Per-flow queue limit in the scheduler (packets).
    #[arg(long, default_value = "256")]
    limit: String,
    /// Throughput phase: link rate (far above what the clients can send).
    #[arg(long, default_value = "10tbit")]
    link: String,
    /// Throughput phase: packet length (bytes).
    #[arg(long, default_value = "64")]
    len: String,
    /// Overload phase: link rate.
    #[arg(long, default_value = "10gbit")]
    overload_link: String,
    /// Overload phase: packet length of every client (bytes).
    #[arg(long, default_value = "1500")]
    overload_len: String,
    /// Overload phase: offered load of the clients together, as a multiple
    /// of the link rate (split in proportion to the weights), or `max` for
    /// clients that send as fast as they can.
    #[arg(long, default_value = "2")]
    overload: String,
    /// Overload phase: the victim's weight (the others' are `--weights`).
    #[arg(long, default_value = "50")]
    victim_weight: String,
    /// Overload phase: the victim's sending rate.
    #[arg(long, default_value = "100mbit")]
    victim_rate: String,
    /// Measured time per run (after the warm-up), e.g. `500ms`, `2s`.
    #[arg(long, default_value = "500ms")]
    duration: String,
    /// Warm-up per run before measuring.
    #[arg(long, default_value = "100ms")]
    warmup: String,
    /// Runs per configuration; the tables show medians.
    #[arg(long, default_value = "3")]
    runs: String,
    /// PSPAT dispatcher threads (0: the arbiter transmits).
    #[arg(long, default_value = "0")]
    dispatchers: String,
    /// PSPAT: clients transmit their own cleared packets (the userspace
    /// PSPAT arrangement) instead of the arbiter; needs 0 dispatchers.
    #[arg(long)]
    client_transmit: bool,
    /// PSPAT Δ_A: minimum time between arbiter rounds (`0` back to back).
    #[arg(long, default_value = "0ns")]
    scan_interval: String,
    /// PSPAT: minimum time between two reads of one mailbox.
    #[arg(long, default_value = "1us")]
    read_interval: String,
    /// Where threads run, the same for every architecture: `float`
    /// (clients not pinned; PSPAT's arbiter on core 0, dispatchers on
    /// core 1), `reserve` (core 0 kept for the arbiter: every
    /// architecture's clients on the other cores), `none` (nothing
    /// pinned).
    #[arg(long, default_value = "none")]
    placement: String,
    /// PSPAT: nice value of the arbiter thread, -20..=19 (negative needs
    /// CAP_SYS_NICE; refused, the arbiter keeps the bench's), or `none`
    /// to inherit the bench's. The arbiter is one thread doing every
    /// client's scheduling, as PSPAT's kernel thread is.
    #[arg(long, default_value = "-20", allow_hyphen_values = true)]
    arbiter_nice: String,
    /// PSPAT: scheduling policy of the arbiter thread: `other` (the
    /// normal policy, at `--arbiter-nice`) or `fifo:N` (SCHED_FIFO at
    /// priority N, 1..=99, as PSPAT's arbiter is a kernel thread no
    /// client preempts; needs CAP_SYS_NICE, refused otherwise). The
    /// kernel throttles real-time threads that run 95 % of a second:
    /// pair it with `--arbiter-nap`.
    #[arg(long, default_value = "other")]
    arbiter_sched: String,
    /// PSPAT: how the arbiter waits on the CPU (for the link, or before
    /// it sleeps when idle): `yield` (threads sharing its core run
    /// meanwhile) or `spin`.
    #[arg(long, default_value = "yield")]
    arbiter_wait: String,
    /// PSPAT hand-off: when no arbiter round started within this time
    /// (the arbiter waits for a core, or sleeps), a sending client runs
    /// the round itself under the arbiter's try-lock; `off` (the
    /// default): never.
    #[arg(long, default_value = "off")]
    assist_after: String,
    /// PSPAT: when no arbiter round started within this time, the
    /// victim's client (and only it, unless `--assist-after` says
    /// otherwise) runs the round itself, so its packets do not wait for
    /// an arbiter thread that lost its core; `off` (the default): as the
    /// other clients.
    #[arg(long, default_value = "off")]
    victim_assist_after: String,
    /// PSPAT nap: when every mailbox is empty and the scheduler's backlog
    /// keeps the link busy for at least this long, the arbiter sleeps for
    /// half of that time (a client's ring wakes it) instead of waiting on
    /// the CPU for each departure; `off` (the default): never.
    #[arg(long, default_value = "off")]
    arbiter_nap: String,
    /// PSPAT step aside: `on`: when the arbiter thread waits for a core,
    /// or sending clients lose theirs, for 30 % of a millisecond, it
    /// sleeps for 2-32 ms while the sending clients run the rounds
    /// (backlogged or not), for as long as that serves about as many
    /// decisions per second; `off` (the default): never.
    #[arg(long, default_value = "off")]
    step_aside: String,
    /// PSPAT starved assist: `on`: a client whose own send gaps show it
    /// lost its core (over 500 µs) runs a round itself when none started
    /// within 2 µs, even while the arbiter thread is present; `off` (the
    /// default): never.
    #[arg(long, default_value = "off")]
    starved_assist: String,
    /// PSPAT humble: `on`: when sending clients lose their cores for 30 %
    /// of a millisecond while the arbiter thread has its core and spends
    /// under half of it in busy rounds, the thread gives up its raised
    /// nice value (`--arbiter-nice`) for 16 ms to 1 s, so the kernel can
    /// put a client on its core; kept while that serves about as many
    /// decisions per second; `off` (the default): never.
    #[arg(long, default_value = "off")]
    humble: String,
    /// PSPAT nap gate: `on` (needs `--arbiter-nap`): the arbiter naps only
    /// while it lacks a core: after a millisecond in which it was runnable
    /// but not running for 25 % of its awake time, for 16 ms to 1 s (kept
    /// while that stays at 5 % or more); `off` (the default): the nap
    /// follows `--arbiter-nap` alone.
    #[arg(long, default_value = "off")]
    nap_when_waiting: String,
    /// A thread spinning on this core through every run of every
    /// architecture (a process that takes one core), or `off`.
    #[arg(long, default_value = "off")]
    busy_core: String,
    /// Same as `--placement none`.
    #[arg(long)]
    no_pin: bool,
    /// Write the throughput-vs-clients plot here (SVG).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print JSON (every run, then the medians) instead of tables.
    #[arg(long)]
    json: bool,
    /// After the tables, print every PSPAT run's counters the way `tc -s`
    /// does (sent, dropped by reason, backlog, where the rest went) plus
    /// the arbiter's and each client's, and a table of what the arbiter
    /// thread did in each run's measured window (share of wall time on a
    /// core and in busy rounds, empty rounds, packets per busy round,
    /// yields, spins and sleeps per second, mailbox-full sends per
    /// decision).
    #[arg(long)]
    stats: bool,
}

impl PspatArgs {
    fn options(&self) -> PspatOptions {
        PspatOptions {
            clients: self.clients.clone(),
            archs: self.archs.clone(),
            phases: self.phases.clone(),
            alg: self.alg.clone(),
            weights: self.weights.clone(),
            batch: self.batch.clone(),
            limit: self.limit.clone(),
            link: self.link.clone(),
            len: self.len.clone(),
            overload_link: self.overload_link.clone(),
            overload_len: self.overload_len.clone(),
            overload: self.overload.clone(),
            victim_weight: self.victim_weight.clone(),
            victim_rate: self.victim_rate.clone(),
            duration: self.duration.clone(),
            warmup: self.warmup.clone(),
            runs: self.runs.clone(),
            dispatchers: self.dispatchers.clone(),
            client_transmit: self.client_transmit,
            scan_interval: self.scan_interval.clone(),
            read_interval: self.read_interval.clone(),
            placement: self.placement.clone(),
            arbiter_nice: self.arbiter_nice.clone(),
            arbiter_sched: self.arbiter_sched.clone(),
            arbiter_wait: self.arbiter_wait.clone(),
            assist_after: self.assist_after.clone(),
            victim_assist_after: self.victim_assist_after.clone(),
            arbiter_nap: self.arbiter_nap.clone(),
            step_aside: self.step_aside.clone(),
            starved_assist: self.starved_assist.clone(),
            humble: self.humble.clone(),
            nap_when_waiting: self.nap_when_waiting.clone(),
            busy_core: self.busy_core.clone(),
            no_pin: self.no_pin,
            thread_counters: self.stats,
        }
    }
}

pub(crate) fn run(a: &PspatArgs, out: &mut Stdout) -> Result<()> {
    let p = Plan::new(&a.options())?;
    if let Some(f) = &a.plot {
        crate::output::check_output_dir("--plot", f, "an SVG file")?;
    }
    let bar = if a.json {
        indicatif::ProgressBar::hidden()
    } else {
        indicatif::ProgressBar::new(p.total_runs())
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} (eta {eta})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut started = false;
    let rep = pspat::run(&p, crate::stop::stop_flag()?, |msg| {
        if started {
            bar.inc(1);
        }
        started = true;
        bar.set_message(msg.to_string());
    })?;
    bar.finish_and_clear();
    if let Some(f) = &a.plot {
        if pspat::has_throughput(&p) {
            pspat::plot(f, &p, &rep.summary)?;
        } else {
            eprintln!("--plot: skipped, it needs the throughput phase");
        }
    }
    if a.json {
        crate::stop::write_json_object(out, &rep, rep.partial)?;
        return crate::stop::interrupted(rep.partial);
    }
    pspat::write_tables(out, &p, &rep.summary)?;
    if a.stats {
        pspat::write_stats(out, &rep.runs)?;
    }
    if let Some(f) = &a.plot {
        writeln!(out, "\nplot: {}", f.display())?;
    }
    crate::stop::mark_partial(out, rep.partial)?;
    crate::stop::interrupted(rep.partial)
}
