//! The arbiter's per-packet path on one thread, for instruction counts:
//! a client sends `N` 64-byte packets one `send` at a time, 64 per round,
//! and after each 64 the arbiter runs one round ([`Arbiter::do_scan`]) at a
//! virtual time 1 µs later (so every round reads the mailbox): mailbox pop →
//! scheduler enqueue → scheduler dequeue → emulated link → null output.
//!
//! ```text
//! cargo bench -p pktsched-runtime --bench arbiter -- --single 1000000 --alg qfq --flows 1
//! ```
//!
//! `--clients K` (K > 1) spreads the packets over `K` clients in turn
//! (packet `i` from client `i mod K`), so a round reads `K` mailboxes of
//! about `64 / K` packets each: the per-visit cost at many clients. (Its
//! own loop, so the one-client loop compiles as before.)
//!
//! It prints the packets transmitted and the arbiter's decisions, nothing
//! else: `ci/instructions.sh` runs it under callgrind twice with different
//! `N` and divides the difference of instructions by the difference of `N`
//! (start-up and set-up cancel out). The client's send is included (one
//! thread does both ends, as the figure in `docs/perf-log.md` does).
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![forbid(unsafe_code)]

use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate};
use pktsched_runtime::{Arbiter, Config, NullOutput, add_flows};

/// Packets per round: the default `read_batch`.
const ROUND: u64 = 64;

struct Args {
    single: u64,
    alg: Algorithm,
    flows: usize,
    clients: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        single: 1_000_000,
        alg: Algorithm::Qfq,
        flows: 1,
        clients: 1,
    };
    let mut it = std::env::args().skip(1);
    while let Some(s) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match s.as_str() {
            "--single" => {
                let v = value("--single")?;
                a.single = v
                    .parse()
                    .map_err(|_| format!("--single {v:?}: expected a packet count"))?;
            }
            "--alg" => a.alg = Algorithm::parse(&value("--alg")?)?,
            "--flows" => {
                let v = value("--flows")?;
                a.flows = v
                    .parse()
                    .ok()
                    .filter(|&n| (1..=65_536).contains(&n))
                    .ok_or(format!("--flows {v:?}: expected 1..=65536"))?;
            }
            "--clients" => {
                let v = value("--clients")?;
                a.clients = v
                    .parse()
                    .ok()
                    .filter(|&n| (1..=64).contains(&n))
                    .ok_or(format!("--clients {v:?}: expected 1..=64"))?;
            }
            _ => {} // `cargo bench` passes `--bench`; ignore what we do not know.
        }
    }
    Ok(a)
}

type Bench = Arbiter<u64, NullOutput>;

/// The loop of `main` with the packets spread over `args.clients` clients.
#[inline(never)]
fn run_many(arb: &mut Bench, flows: &[FlowId], args: &Args) {
    let mut clients: Vec<_> = (0..args.clients)
        .map(|_| arb.client().expect("client"))
        .collect();
    let (mut now, mut sent, mut next, mut who) = (0u64, 0u64, 0usize, 0usize);
    while sent < args.single {
        let end = (sent + ROUND).min(args.single);
        while sent < end {
            let flow = flows[next];
            next = if next + 1 == flows.len() { 0 } else { next + 1 };
            clients[who]
                .send(Pkt::new(flow, 64, Nanos(now), sent))
                .expect("the mailbox holds a round");
            who = if who + 1 == clients.len() { 0 } else { who + 1 };
            sent += 1;
        }
        now += 1_000;
        arb.do_scan(Nanos(now));
    }
    report(arb);
}

/// Prints the packets transmitted and the arbiter's decisions.
fn report(arb: &Bench) {
    let stats = arb.stats();
    let out = arb.output().copied().unwrap_or_default();
    println!("{} {}", out.pkts, stats.decisions);
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("arbiter bench: {e}");
            std::process::exit(2);
        }
    };
    let cfg = Config::new(Rate::from_bps(10_000_000_000_000).expect("10 Tbit/s"));
    let mut sched = args.alg.build_send::<u64>();
    let flows = add_flows(&mut *sched, &[1], args.flows, 256).expect("flows");
    let mut arb = Arbiter::new(&cfg, sched, NullOutput::default()).expect("arbiter");
    if args.clients > 1 {
        run_many(&mut arb, &flows, &args);
        return;
    }
    let mut client = arb.client().expect("client");
    let mut now = 0u64;
    let mut sent = 0u64;
    // The flows in turn (an index that wraps, not a division per packet:
    // the harness's own work is not the arbiter's).
    let mut next = 0usize;
    while sent < args.single {
        let end = (sent + ROUND).min(args.single);
        while sent < end {
            let flow: FlowId = flows[next];
            next += 1;
            if next == flows.len() {
                next = 0;
            }
            client
                .send(Pkt::new(flow, 64, Nanos(now), sent))
                .expect("the mailbox holds a round");
            sent += 1;
        }
        now += 1_000;
        arb.do_scan(Nanos(now));
    }
    let stats = arb.stats();
    let out = arb.output().copied().unwrap_or_default();
    println!("{} {}", out.pkts, stats.decisions);
}
