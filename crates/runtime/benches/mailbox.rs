//! SPSC throughput, side by side in one run: the PSPAT mailbox vs `rtrb`,
//! `crossbeam_queue::ArrayQueue` and `std::sync::mpsc::sync_channel`.
//!
//! Producer and consumer are pinned to the first two cores; `u64` items; the
//! consumer checks every item is the next in sequence. Runs are interleaved
//! (one run of each queue, then the next round) so slow drift of a noisy
//! machine hits all queues alike. A run is *clean* when both threads were on
//! a CPU for at least 90 % of it (from `/proc/thread-self/schedstat`); the
//! median is taken over the clean runs when there are at least 3, else over
//! all runs. Min and max are over all runs. Hypervisor steal time is not
//! visible to this filter.
//!
//! Besides the default mailbox (28-slot lines of four 7-slot groups, each
//! group one 64-byte hardware line), a row with 7-slot lines (one group per
//! line), one with 14-slot lines of one group (14 stamps, then 14
//! values: the stamp and value of slots 6..13 in different hardware lines)
//! and one with 14-slot lines (two groups) compare layouts in the same
//! interleaved rounds, and a row with the consumer's software prefetch on
//! (`Consumer::set_prefetch(true)`; off by default) measures what the
//! prefetch is worth. The row "push runs" pushes with one `try_push_many`
//! until the queue is full and pops one item a call: the shape spscq's
//! `iffq` loop has once compiled (its producer's write index stays in a
//! register), the like-for-like row against it. The rows "word mailbox"
//! and "word mailbox, push runs" are the same two loops over the word
//! mailbox (`Mailbox::words`: one store per push, one load per pop; the
//! items travel as value + 1, since 0 marks an empty slot there).
//! The `P run` and `C run` columns say in which
//! regime a queue ran: items per stretch between two stalls of the producer
//! on a full queue, and of the consumer on an empty one (spscq prints the
//! same as "avg batch"). A small `C run` means the consumer keeps catching
//! up and both threads write and read the same line item by item; a small
//! `P run` means the queue runs full and they work a ring apart. The same
//! queue may run in either regime, which moves its rate.
//!
//! ```text
//! cargo bench -p pktsched-runtime --bench mailbox               # ~15 s
//! cargo bench -p pktsched-runtime --bench mailbox -- --runs 11 --scale 2
//! cargo bench -p pktsched-runtime --bench mailbox -- --only mailbox --capacity 1024
//! ```
//!
//! `--single N` instead moves `N` items on one thread (pushes of 64, then
//! pops of 64) through the queue named by `--only` (`mailbox`, the default;
//! `pf` (the prefetch on), `pushrun` (push runs, single pops), `words` (the
//! word mailbox), `wordrun` (its push runs), `mailbox7`, `onegroup`, `mailbox14`, `batch`, `rtrb`)
//! and prints nothing but a checksum: it is the workload `ci/instructions-queues.sh`
//! runs under callgrind (instructions per item = the difference of two runs
//! of different `N`, divided by the difference of `N`).
#![allow(clippy::unwrap_used)]
#![forbid(unsafe_code)]

use std::hint::spin_loop;
use std::num::NonZeroU64;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use pktsched_runtime::mailbox::{Consumer, Mailbox, Producer, WordConsumer, WordProducer};
use pktsched_runtime::thread_cpu_ns;

/// One queue under test: how to build it and move one item each way.
trait Queue {
    const NAME: &'static str;
    /// Items per run at scale 1 (about 0.1 s each).
    const ITEMS: u64;
    type Tx: Send + 'static;
    type Rx: Send + 'static;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx);
    /// Pushes `first..first + n` (or fewer); returns how many were pushed.
    fn push(tx: &mut Self::Tx, first: u64, n: u64) -> u64;
    /// Pops some items, feeding each to `check`; returns how many.
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64;
}

/// The mailbox with lines of `L` slots in groups of `H` (see
/// `pktsched_runtime::mailbox`): the default 28 / 7 (four 64-byte groups per
/// 256-byte line, every slot's stamp and value in one hardware line);
/// 7 / 7, one 64-byte group per line (the same locality, a look-ahead and a
/// release every 7 items); 14 / 14, one group per line (14 stamps then 14
/// values: slots 6..13 keep their value in the second 64 bytes and their
/// stamp in the first, so a hand-over moves two hardware lines); 14 / 7,
/// two groups per line (the default until 2026-11-26).
struct PspatMailbox<const L: usize, const H: usize>;

const fn layout_name(l: usize, h: usize) -> &'static str {
    match (l, h) {
        (28, 7) => "pspat mailbox",
        (7, 7) => "pspat mailbox, 7-slot lines",
        (14, 14) => "pspat mailbox, 1-group lines",
        (14, 7) => "pspat mailbox, 14-slot lines",
        _ => "pspat mailbox, other layout",
    }
}

impl<const L: usize, const H: usize> Queue for PspatMailbox<L, H> {
    const NAME: &'static str = layout_name(L, H);
    const ITEMS: u64 = 20_000_000;
    type Tx = Producer<u64, L, H>;
    type Rx = Consumer<u64, L, H>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        Mailbox::with_layout(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, _n: u64) -> u64 {
        u64::from(tx.try_push(first).is_ok())
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        match rx.pop() {
            Some(v) => {
                check(v);
                1
            }
            None => 0,
        }
    }
}

/// The default layout.
type PspatDefault = PspatMailbox<28, 7>;
/// One 64-byte group per line.
type Pspat7 = PspatMailbox<7, 7>;
/// One 128-byte group per line (stamps, then values).
type PspatOneGroup = PspatMailbox<14, 14>;
/// Two 64-byte groups per line: a look-ahead and a release every 14 items
/// (spscq's iffq, as `run spscq` configures it, checks 32-entry lines of
/// 256 bytes, like the default's 28).
type Pspat14 = PspatMailbox<14, 7>;

/// The default layout with the consumer's software prefetch on
/// (`Consumer::set_prefetch(true)`; off by default since 2026-11-27).
struct PspatPrefetch;
impl Queue for PspatPrefetch {
    const NAME: &'static str = "pspat mailbox, prefetch";
    const ITEMS: u64 = 20_000_000;
    type Tx = Producer<u64>;
    type Rx = Consumer<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        let (tx, mut rx) = Mailbox::with_capacity(capacity);
        rx.set_prefetch(true);
        (tx, rx)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, n: u64) -> u64 {
        PspatDefault::push(tx, first, n)
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        PspatDefault::pop(rx, check)
    }
}

/// The mailbox with its batch APIs (up to 32 items a call).
struct PspatMailboxBatch;
impl Queue for PspatMailboxBatch {
    const NAME: &'static str = "pspat mailbox, batch 32";
    const ITEMS: u64 = 20_000_000;
    type Tx = Producer<u64>;
    type Rx = Consumer<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        Mailbox::with_capacity(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, n: u64) -> u64 {
        tx.try_push_many(&mut (first..first + n.min(32))) as u64
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        rx.pop_batch(32, check) as u64
    }
}

/// The mailbox pushed the way spscq's `iffq` loop runs once compiled: the
/// producer keeps its position in registers until the queue is full (one
/// `try_push_many` over the rest of the items: the position is stored once
/// per 7-slot group), the consumer pops one item a call. GCC keeps
/// `iffq_producer`'s write index in a register for the whole run (its slot
/// store is `volatile`, which orders nothing), so its producer makes one
/// store per item; a `try_push` per item makes three (value, stamp,
/// position: the stamp's `Release` store keeps the position's store in
/// the loop). This row is the like-for-like one for the producer's side.
struct PspatPushRun;
impl Queue for PspatPushRun {
    const NAME: &'static str = "pspat mailbox, push runs";
    const ITEMS: u64 = 20_000_000;
    type Tx = Producer<u64>;
    type Rx = Consumer<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        Mailbox::with_capacity(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, n: u64) -> u64 {
        tx.try_push_many(&mut (first..first + n)) as u64
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        PspatDefault::pop(rx, check)
    }
}

/// The word mailbox (`Mailbox::words`, `pktsched_runtime::mailbox::word`):
/// each item is one non-zero word, so a push is one store (the word) and a
/// pop one load, the consumer clearing a line of words at a time. The
/// bench's items are counter values from 0, and 0 is the word mailbox's
/// empty mark, so each travels as its value + 1 (`NonZeroU64::MIN
/// .saturating_add`, exact below `u64::MAX`) and the consumer subtracts 1.
/// One `try_push` / `pop` per item, as the default row.
struct PspatWords;
impl Queue for PspatWords {
    const NAME: &'static str = "pspat word mailbox";
    const ITEMS: u64 = 20_000_000;
    type Tx = WordProducer<NonZeroU64>;
    type Rx = WordConsumer<NonZeroU64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        Mailbox::words(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, _n: u64) -> u64 {
        u64::from(tx.try_push(NonZeroU64::MIN.saturating_add(first)).is_ok())
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        match rx.pop() {
            Some(v) => {
                check(v.get() - 1);
                1
            }
            None => 0,
        }
    }
}

/// The word mailbox pushed as "push runs" does the generic one: one
/// `try_push_many` over the rest of the items until the queue is full (its
/// position stays in a register for a whole line: one store per item, as
/// spscq's `iffq_producer` once compiled), single pops.
struct PspatWordRun;
impl Queue for PspatWordRun {
    const NAME: &'static str = "pspat word mailbox, push runs";
    const ITEMS: u64 = 20_000_000;
    type Tx = WordProducer<NonZeroU64>;
    type Rx = WordConsumer<NonZeroU64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        Mailbox::words(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, n: u64) -> u64 {
        let mut items = (first..first + n).map(|v| NonZeroU64::MIN.saturating_add(v));
        tx.try_push_many(&mut items) as u64
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        PspatWords::pop(rx, check)
    }
}

struct Rtrb;
impl Queue for Rtrb {
    const NAME: &'static str = "rtrb 0.3";
    const ITEMS: u64 = 20_000_000;
    type Tx = rtrb::Producer<u64>;
    type Rx = rtrb::Consumer<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        rtrb::RingBuffer::new(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, _n: u64) -> u64 {
        u64::from(tx.push(first).is_ok())
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        match rx.pop() {
            Ok(v) => {
                check(v);
                1
            }
            Err(_) => 0,
        }
    }
}

struct CrossbeamArrayQueue;
impl Queue for CrossbeamArrayQueue {
    const NAME: &'static str = "crossbeam ArrayQueue";
    const ITEMS: u64 = 4_000_000;
    type Tx = Arc<ArrayQueue<u64>>;
    type Rx = Arc<ArrayQueue<u64>>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        let q = Arc::new(ArrayQueue::new(capacity));
        (Arc::clone(&q), q)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, _n: u64) -> u64 {
        u64::from(tx.push(first).is_ok())
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        match rx.pop() {
            Some(v) => {
                check(v);
                1
            }
            None => 0,
        }
    }
}

struct StdSyncChannel;
impl Queue for StdSyncChannel {
    const NAME: &'static str = "std sync_channel";
    const ITEMS: u64 = 1_500_000;
    type Tx = SyncSender<u64>;
    type Rx = Receiver<u64>;
    fn make(capacity: usize) -> (Self::Tx, Self::Rx) {
        sync_channel(capacity)
    }
    #[inline]
    fn push(tx: &mut Self::Tx, first: u64, _n: u64) -> u64 {
        match tx.try_send(first) {
            Ok(()) => 1,
            Err(TrySendError::Full(_)) => 0,
            Err(TrySendError::Disconnected(_)) => panic!("receiver gone"),
        }
    }
    #[inline]
    fn pop(rx: &mut Self::Rx, check: &mut impl FnMut(u64)) -> u64 {
        match rx.try_recv() {
            Ok(v) => {
                check(v);
                1
            }
            Err(_) => 0,
        }
    }
}

/// Fraction of `wall` this thread was on a CPU since `start_ns` (1.0 if the
/// kernel does not say).
fn on_cpu_fraction(start_ns: Option<u64>, wall: Duration) -> f64 {
    match (start_ns, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b.saturating_sub(a)) as f64 / wall.as_nanos().max(1) as f64,
        _ => 1.0,
    }
}

/// Share of its time each thread must have been on a CPU for a run to count
/// as clean (not disturbed by other processes on this shared machine).
const CLEAN_ON_CPU: f64 = 0.9;

/// One run: items per second, and whether both threads kept their CPU.
fn run_once<Q: Queue>(capacity: usize, items: u64, cores: &[core_affinity::CoreId]) -> Run {
    let (mut tx, mut rx) = Q::make(capacity);
    let barrier = Arc::new(Barrier::new(2));
    let (pcore, ccore) = (cores.first().copied(), cores.get(1).copied());
    let b = Arc::clone(&barrier);
    let producer = thread::spawn(move || {
        if let Some(c) = pcore {
            core_affinity::set_for_current(c);
        }
        b.wait();
        let start = Instant::now();
        let cpu = thread_cpu_ns();
        let mut next = 0;
        let (mut stalls, mut stalled) = (0u64, false);
        while next < items {
            let n = Q::push(&mut tx, next, items - next);
            if n == 0 {
                stalls += u64::from(!stalled);
                stalled = true;
                spin_loop();
            } else {
                stalled = false;
            }
            next += n;
        }
        let share = on_cpu_fraction(cpu, start.elapsed());
        // Keep the producer alive until the consumer is done (an `mpsc`
        // receiver would otherwise see a disconnect, not an empty queue).
        b.wait();
        (share, stalls)
    });
    let consumer = thread::spawn(move || {
        if let Some(c) = ccore {
            core_affinity::set_for_current(c);
        }
        barrier.wait();
        let start = Instant::now();
        let cpu = thread_cpu_ns();
        let mut expect = 0u64;
        let mut check = |v: u64| {
            assert_eq!(v, expect);
            expect += 1;
        };
        let mut got = 0;
        let (mut stalls, mut stalled) = (0u64, false);
        while got < items {
            let n = Q::pop(&mut rx, &mut check);
            if n == 0 {
                stalls += u64::from(!stalled);
                stalled = true;
                spin_loop();
            } else {
                stalled = false;
            }
            got += n;
        }
        let elapsed = start.elapsed();
        let share = on_cpu_fraction(cpu, elapsed);
        barrier.wait();
        (elapsed, share, stalls)
    });
    let (pshare, pstalls) = producer.join().unwrap();
    let (elapsed, cshare, cstalls) = consumer.join().unwrap();
    Run {
        rate: items as f64 / elapsed.as_secs_f64(),
        clean: pshare >= CLEAN_ON_CPU && cshare >= CLEAN_ON_CPU,
        full_run: items as f64 / pstalls.max(1) as f64,
        empty_run: items as f64 / cstalls.max(1) as f64,
    }
}

/// One timed run of one queue.
#[derive(Clone, Copy)]
struct Run {
    /// Items per second (consumer's wall time).
    rate: f64,
    /// Both threads were on a CPU for at least [`CLEAN_ON_CPU`] of the run.
    clean: bool,
    /// Items per stretch of pushes between two "full" stalls of the
    /// producer (spscq's "[P] avg batch"): large when the queue rarely
    /// fills.
    full_run: f64,
    /// Items per stretch of pops between two "empty" stalls of the consumer
    /// (spscq's "[C] avg batch"): small when the consumer keeps catching up
    /// with the producer and both work on the same line.
    empty_run: f64,
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The figures of one queue over its runs.
struct Summary {
    /// Median rate over the clean runs if there are at least 3, else over
    /// all runs.
    median: f64,
    clean: usize,
    min: f64,
    max: f64,
    /// Medians, over the same runs, of [`Run::full_run`] and
    /// [`Run::empty_run`].
    full_run: f64,
    empty_run: f64,
}

fn summary(runs: &[Run]) -> Summary {
    let n_clean = runs.iter().filter(|r| r.clean).count();
    let counted: Vec<&Run> = runs.iter().filter(|r| r.clean || n_clean < 3).collect();
    let med = |f: fn(&Run) -> f64| median(&mut counted.iter().map(|r| f(r)).collect::<Vec<_>>());
    let mut all: Vec<f64> = runs.iter().map(|r| r.rate).collect();
    all.sort_by(f64::total_cmp);
    Summary {
        median: med(|r| r.rate),
        clean: n_clean,
        min: all.first().copied().unwrap_or(f64::NAN),
        max: all.last().copied().unwrap_or(f64::NAN),
        full_run: med(|r| r.full_run),
        empty_run: med(|r| r.empty_run),
    }
}

struct Args {
    single: Option<u64>,
    runs: usize,
    only: Option<String>,
    scale: f64,
    capacities: Vec<usize>,
}

fn parse_args() -> Args {
    let mut args = Args {
        single: None,
        runs: 15,
        only: None,
        scale: 0.5,
        capacities: vec![1024, 512],
    };
    // `cargo test --all-targets` runs this binary with neither `--bench`
    // nor an option of ours: a smoke run (one round, small counts) checks
    // that it works without spending CI minutes on a measurement nobody
    // reads.
    let ours = [
        "--bench",
        "--runs",
        "--only",
        "--single",
        "--scale",
        "--capacity",
    ];
    if !std::env::args().any(|a| ours.contains(&a.as_str())) {
        args.runs = 1;
        args.scale = 0.01;
    }
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => args.runs = it.next().and_then(|s| s.parse().ok()).unwrap_or(15).max(1),
            "--only" => args.only = it.next(),
            "--single" => args.single = it.next().and_then(|s| s.parse().ok()),
            "--scale" => args.scale = it.next().and_then(|s| s.parse().ok()).unwrap_or(0.5),
            "--capacity" => {
                args.capacities = it
                    .next()
                    .map(|s| s.split(',').filter_map(|c| c.parse().ok()).collect())
                    .unwrap_or_default();
            }
            _ => {} // `cargo bench` passes `--bench`; ignore what we do not know.
        }
    }
    args
}

type Runner = fn(usize, u64, &[core_affinity::CoreId]) -> Run;

/// Moves `items` items through a queue on this thread, 64 at a time;
/// returns the sum of what came out (so nothing is optimised away).
#[inline(never)]
fn single_thread<Q: Queue>(capacity: usize, items: u64) -> u64 {
    let (mut tx, mut rx) = Q::make(capacity);
    let mut sum = 0u64;
    let mut check = |v: u64| sum = sum.wrapping_add(v);
    let mut next = 0;
    while next < items {
        let end = (next + 64).min(items);
        let mut i = next;
        while i < end {
            i += Q::push(&mut tx, i, end - i);
        }
        let mut got = 0;
        while got < end - next {
            got += Q::pop(&mut rx, &mut check);
        }
        next = end;
    }
    std::hint::black_box(sum)
}

fn main() {
    let args = parse_args();
    if let Some(n) = args.single {
        let cap = args.capacities.first().copied().unwrap_or(1024);
        let sum = match args.only.as_deref() {
            Some("rtrb") => single_thread::<Rtrb>(cap, n),
            Some("batch") => single_thread::<PspatMailboxBatch>(cap, n),
            Some("mailbox7") => single_thread::<Pspat7>(cap, n),
            Some("onegroup") => single_thread::<PspatOneGroup>(cap, n),
            Some("mailbox14") => single_thread::<Pspat14>(cap, n),
            Some("pf") => single_thread::<PspatPrefetch>(cap, n),
            Some("pushrun") => single_thread::<PspatPushRun>(cap, n),
            Some("words") => single_thread::<PspatWords>(cap, n),
            Some("wordrun") => single_thread::<PspatWordRun>(cap, n),
            _ => single_thread::<PspatDefault>(cap, n),
        };
        println!("{sum}");
        return;
    }
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    if cores.len() < 2 {
        eprintln!("warning: fewer than 2 cores visible; threads are not pinned");
    }
    let queues: [(&str, u64, Runner); 12] = [
        (
            PspatDefault::NAME,
            PspatDefault::ITEMS,
            run_once::<PspatDefault>,
        ),
        (
            PspatPrefetch::NAME,
            PspatPrefetch::ITEMS,
            run_once::<PspatPrefetch>,
        ),
        (Pspat7::NAME, Pspat7::ITEMS, run_once::<Pspat7>),
        (
            PspatOneGroup::NAME,
            PspatOneGroup::ITEMS,
            run_once::<PspatOneGroup>,
        ),
        (Pspat14::NAME, Pspat14::ITEMS, run_once::<Pspat14>),
        (
            PspatMailboxBatch::NAME,
            PspatMailboxBatch::ITEMS,
            run_once::<PspatMailboxBatch>,
        ),
        (
            PspatPushRun::NAME,
            PspatPushRun::ITEMS,
            run_once::<PspatPushRun>,
        ),
        (PspatWords::NAME, PspatWords::ITEMS, run_once::<PspatWords>),
        (
            PspatWordRun::NAME,
            PspatWordRun::ITEMS,
            run_once::<PspatWordRun>,
        ),
        (Rtrb::NAME, Rtrb::ITEMS, run_once::<Rtrb>),
        (
            CrossbeamArrayQueue::NAME,
            CrossbeamArrayQueue::ITEMS,
            run_once::<CrossbeamArrayQueue>,
        ),
        (
            StdSyncChannel::NAME,
            StdSyncChannel::ITEMS,
            run_once::<StdSyncChannel>,
        ),
    ];
    println!(
        "SPSC u64 throughput, producer on core {:?}, consumer on core {:?}, {} runs, interleaved",
        cores.first().map(|c| c.id),
        cores.get(1).map(|c| c.id),
        args.runs
    );
    for &capacity in &args.capacities {
        let mut results: Vec<Vec<Run>> = vec![Vec::new(); queues.len()];
        let wanted = |name: &str| match &args.only {
            Some(o) => name.contains(o.as_str()) || name.starts_with("rtrb"),
            None => true,
        };
        // Warm-up round (not counted).
        for (name, items, run) in &queues {
            if wanted(name) {
                run(capacity, (*items / 10).max(1000), &cores);
            }
        }
        for _ in 0..args.runs {
            for (i, (name, items, run)) in queues.iter().enumerate() {
                if wanted(name) {
                    let n = ((*items as f64) * args.scale).max(1000.0) as u64;
                    results[i].push(run(capacity, n, &cores));
                }
            }
        }
        let sums: Vec<Summary> = results.iter().map(|r| summary(r)).collect();
        let rate_of = |name: &str| {
            queues
                .iter()
                .position(|q| q.0 == name)
                .map_or(f64::NAN, |i| sums[i].median)
        };
        let (rtrb_m, aq_m) = (rate_of(Rtrb::NAME), rate_of(CrossbeamArrayQueue::NAME));
        println!();
        println!("capacity {capacity}");
        println!(
            "{:<30} {:>10} {:>6} {:>8} {:>8} {:>7} {:>8} {:>8} {:>8}",
            "queue", "median M/s", "clean", "min", "max", "/rtrb", "/ArrayQ", "P run", "C run"
        );
        for (i, (name, _, _)) in queues.iter().enumerate() {
            if results[i].is_empty() {
                continue;
            }
            let s = &sums[i];
            println!(
                "{:<30} {:>10.1} {:>3}/{:<2} {:>8.1} {:>8.1} {:>7.2} {:>8.2} {:>8.0} {:>8.0}",
                name,
                s.median / 1e6,
                s.clean,
                results[i].len(),
                s.min / 1e6,
                s.max / 1e6,
                s.median / rtrb_m,
                s.median / aq_m,
                s.full_run,
                s.empty_run
            );
        }
    }
    println!();
    println!(
        "median over clean runs (both threads on a CPU >= {:.0}% of the run) when >= 3, else over all",
        CLEAN_ON_CPU * 100.0
    );
    println!(
        "P run / C run: items per stretch between two full (producer) / empty (consumer) stalls, \
         as spscq's [P] / [C] avg batch"
    );
}
