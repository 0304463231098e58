//! The fluid reference on a second thread.
//!
//! The GPS fluid system depends on the packet system only through the
//! arrivals it is given, and those do not depend on the packet system when
//! (a) greedy flows are taken as backlogged from their start to the end of
//! the arrivals (they are: the engine keeps [`GREEDY_DEPTH`] packets of them
//! in the fluid system, and a greedy packet's fluid start is its
//! predecessor's finish whenever it arrives), and (b) no other packet is
//! refused by the scheduler. So this thread replays the sources itself
//! (clones of the engine's seeded generators, drawing the same lengths in
//! the same order) and streams the fluid departures, in order, to the
//! engine, which still drives greedy arrivals from them and matches each
//! departure to the flow's oldest unfinished packet.
//!
//! The one thing the thread cannot know alone is how many packets each
//! greedy flow got before the arrivals stop (a greedy packet may also come
//! when the *packet* system dequeues): it processes every event before
//! `duration`, sends a marker saying so, and waits for the engine's
//! counts. If the scheduler refused a packet (the premise (b) fails), the
//! engine runs the scenario again on one thread; the results are the same
//! either way (tested).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{Receiver, SyncSender};

use crate::engine::GREEDY_DEPTH;
use crate::fluid::Fluid;
use crate::source::{Ahead, Gen};

/// Asks the CPU to bring `r` into the cache without waiting for it (a
/// hint: no effect on results; a no-op off x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program can observe and cannot
    // fault; `r` is a valid reference anyway. SSE, which the intrinsic
    // needs, is part of the x86-64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            std::ptr::from_ref(r).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}

/// Departures per message.
pub(crate) const BATCH: usize = 1024;
/// Messages in flight: how far the fluid thread may run ahead.
pub(crate) const DEPTH: usize = 64;
/// `flow` of a marker: no departure comes before its `order` time.
pub(crate) const MARK: u32 = u32::MAX;

/// One item of the stream: a fluid departure of `flow`, ordered at `order`
/// (ps, rounded up, as the engine orders events) and finished at `t_ps`
/// (rounded to nearest), or a marker.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    pub order: u64,
    pub t_ps: u64,
    pub flow: u32,
}

/// What the fluid thread reports at the end.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Summary {
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub overflow: bool,
    /// Greedy packets the thread had queued beyond the engine's counts
    /// (must be 0: a non-zero value means the premise failed).
    pub excess: u64,
    /// The thread's CPU time, ns.
    pub cpu_ns: Option<u64>,
}

/// The fluid thread's inputs.
pub(crate) struct Job {
    pub bps: u64,
    pub weights: Vec<u32>,
    pub gens: Vec<Gen>,
    pub greedy: Vec<bool>,
    pub duration_ps: u64,
}

/// Runs the fluid system of `job`, sending departures on `tx` and reading
/// the greedy flows' final packet counts from `counts` when the arrivals
/// end. Returns early (with what it has) if the engine hangs up.
pub(crate) fn run(
    mut job: Job,
    tx: &SyncSender<Vec<Item>>,
    counts: &Receiver<Vec<u64>>,
) -> Summary {
    const NONE: u64 = u64::MAX;
    let n = job.weights.len();
    let mut fl = Fluid::new(job.bps, &job.weights);
    let mut free: Vec<u32> = Vec::new();
    let mut next_id = 0u32;
    let mut id = |free: &mut Vec<u32>| {
        free.pop().unwrap_or_else(|| {
            next_id += 1;
            next_id - 1
        })
    };
    let mut src: BinaryHeap<Reverse<(u64, u32, u32)>> = BinaryHeap::new();
    let mut arrived = vec![0u64; n];
    let mut ahead = vec![Ahead::new(); n];
    let mut out: Vec<Item> = Vec::with_capacity(BATCH);
    let dur = job.duration_ps;
    for (i, ((g, a), ah)) in job
        .gens
        .iter_mut()
        .zip(&mut arrived)
        .zip(&mut ahead)
        .enumerate()
    {
        if job.greedy[i] {
            if dur > 0 {
                for _ in 0..GREEDY_DEPTH {
                    let len = ah.next(g);
                    let k = id(&mut free);
                    fl.arrive(i as u32, len, 0, k);
                    *a += 1;
                }
            }
        } else if let Some((t, len)) = g.first()
            && t < dur
        {
            src.push(Reverse((t, i as u32, len)));
        }
    }
    let mut greedy_open = true;
    let summary = |fl: &Fluid, excess: u64| Summary {
        bytes_in: fl.bytes_in,
        bytes_out: fl.bytes_out,
        overflow: fl.overflowed(),
        excess,
        cpu_ns: crate::thread_cpu_ns(),
    };
    let mut excess = 0u64;
    loop {
        let ta = src.peek().map_or(NONE, |r| r.0.0);
        let td = fl.next_time().unwrap_or(NONE);
        if greedy_open && ta.min(td) >= dur {
            // Everything before the end of the arrivals is done: say so and
            // learn how many packets each greedy flow really got.
            out.push(Item {
                order: dur,
                t_ps: dur,
                flow: MARK,
            });
            if tx.send(std::mem::take(&mut out)).is_err() {
                return summary(&fl, excess);
            }
            let Ok(c) = counts.recv() else {
                return summary(&fl, excess);
            };
            for (i, &want) in c.iter().enumerate().take(n) {
                if !job.greedy[i] {
                    continue;
                }
                // The flow is still backlogged here (it holds at least one
                // packet until the end of the arrivals), so when these came
                // does not change their fluid finish times.
                while arrived[i] < want {
                    let len = ahead[i].next(&mut job.gens[i]);
                    let k = id(&mut free);
                    fl.arrive(i as u32, len, dur, k);
                    arrived[i] += 1;
                }
                excess += arrived[i].saturating_sub(want);
            }
            greedy_open = false;
            continue;
        }
        if ta == NONE && td == NONE {
            break;
        }
        if td <= ta {
            let Some(d) = fl.pop() else { break };
            free.push(d.id);
            out.push(Item {
                order: td,
                t_ps: d.t_ps,
                flow: d.flow,
            });
            let f = d.flow as usize;
            if greedy_open && job.greedy[f] {
                let len = ahead[f].next(&mut job.gens[f]);
                let k = id(&mut free);
                fl.arrive(d.flow, len, d.t_ps, k);
                arrived[f] += 1;
            }
        } else if let Some(Reverse((t, flow, len))) = src.pop() {
            let k = id(&mut free);
            fl.arrive(flow, len, t, k);
            if let Some((t2, l2)) = job.gens[flow as usize].next(t, len)
                && t2 < dur
            {
                src.push(Reverse((t2, flow, l2)));
            }
        }
        if out.len() >= BATCH
            && tx
                .send(std::mem::replace(&mut out, Vec::with_capacity(BATCH)))
                .is_err()
        {
            return summary(&fl, excess);
        }
    }
    if !out.is_empty() {
        let _ = tx.send(out);
    }
    summary(&fl, excess)
}
