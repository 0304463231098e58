//! The fluid stream: the fluid reference on a second thread (the engine's
//! two-thread mode), both ends of it.
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
//!
//! `FluidThread` is the thread; [`FluidStream`] is the engine's end
//! (it reads the departures in order and keeps, per flow, how many packets
//! the fluid system holds and which ones). This module does not import the
//! engine: the engine links the packet records of a flow's fluid FIFO
//! itself, through [`FluidFlowQueue`]'s `head`/`tail` ids.

use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::thread::JoinHandle;

use super::arrivals::ArrivalQueue;
use crate::fluid::Fluid;
use crate::model::GREEDY_DEPTH;
use crate::source::{Ahead, Gen};

/// "No time": no event of this kind is pending.
const NO_TIME: u64 = u64::MAX;
/// "No packet": the end of a flow's fluid FIFO.
pub(super) const NO_PACKET: u32 = u32::MAX;

/// Departures per message.
const BATCH: usize = 1024;
/// Messages in flight: how far the fluid thread may run ahead.
const DEPTH: usize = 64;
/// `flow` of the end-of-arrivals marker: no departure comes before its
/// `order` time.
const END_OF_ARRIVALS: u32 = u32::MAX;

/// One item of the stream: a fluid departure of `flow`, ordered at `order`
/// (ps, rounded up, as the engine orders events) and finished at `t_ps`
/// (rounded to nearest), or the end-of-arrivals marker.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct StreamItem {
    pub(super) order: u64,
    pub(super) t_ps: u64,
    pub(super) flow: u32,
}

/// What the fluid thread reports at the end.
#[derive(Copy, Clone, Debug, Default)]
struct FluidThreadSummary {
    bytes_in: u64,
    bytes_out: u64,
    overflow: bool,
    /// Greedy packets the thread had queued beyond the engine's counts
    /// (must be 0: a non-zero value means the premise failed).
    excess: u64,
    /// The thread's CPU time, ns.
    cpu_ns: Option<u64>,
}

/// The fluid thread's inputs.
struct FluidJob {
    bps: u64,
    weights: Vec<u32>,
    gens: Vec<Gen>,
    greedy: Vec<bool>,
    duration_ps: u64,
}

/// Packet ids of the fluid thread's own system, reused once departed.
#[derive(Default)]
struct IdPool {
    free: Vec<u32>,
    next: u32,
}

impl IdPool {
    fn take(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            self.next += 1;
            self.next - 1
        })
    }
}

/// The fluid thread: its own fluid system fed by its own replay of the
/// sources.
struct FluidThread {
    job: FluidJob,
    fluid: Fluid,
    ids: IdPool,
    arrivals: ArrivalQueue,
    /// Per flow, packets given to the fluid system.
    arrived: Vec<u64>,
    ahead: Vec<Ahead>,
    excess: u64,
}

impl FluidThread {
    /// Greedy flows start with [`GREEDY_DEPTH`] packets at time 0; timed
    /// sources get their first arrival queued.
    fn new(job: FluidJob) -> FluidThread {
        let n = job.weights.len();
        let mut t = FluidThread {
            fluid: Fluid::new(job.bps, &job.weights),
            ids: IdPool::default(),
            arrivals: ArrivalQueue::default(),
            arrived: vec![0; n],
            ahead: vec![Ahead::new(); n],
            excess: 0,
            job,
        };
        let dur = t.job.duration_ps;
        for i in 0..n {
            if t.job.greedy[i] {
                if dur > 0 {
                    for _ in 0..GREEDY_DEPTH {
                        t.greedy_arrival(i as u32, 0);
                    }
                }
            } else if let Some((at, len)) = t.job.gens[i].first()
                && at < dur
            {
                t.arrivals.push(at, i as u32, len);
            }
        }
        t
    }

    /// The next packet of greedy flow `flow` arrives at `t_ps`.
    fn greedy_arrival(&mut self, flow: u32, t_ps: u64) {
        let f = flow as usize;
        let len = self.ahead[f].next(&mut self.job.gens[f]);
        let id = self.ids.take();
        self.fluid.arrive(flow, len, t_ps, id);
        self.arrived[f] += 1;
    }

    /// At the end of the arrivals: tops the greedy flows up to the packet
    /// counts the engine gave them.
    fn apply_greedy_counts(&mut self, counts: &[u64]) {
        let dur = self.job.duration_ps;
        for (i, &want) in counts.iter().enumerate().take(self.arrived.len()) {
            if !self.job.greedy[i] {
                continue;
            }
            // The flow is still backlogged here (it holds at least one
            // packet until the end of the arrivals), so when these came
            // does not change their fluid finish times.
            while self.arrived[i] < want {
                self.greedy_arrival(i as u32, dur);
            }
            self.excess += self.arrived[i].saturating_sub(want);
        }
    }

    fn summary(&self) -> FluidThreadSummary {
        FluidThreadSummary {
            bytes_in: self.fluid.bytes_in,
            bytes_out: self.fluid.bytes_out,
            overflow: self.fluid.overflowed(),
            excess: self.excess,
            cpu_ns: crate::thread_cpu_ns(),
        }
    }

    /// Runs the fluid system, sending departures on `tx` and reading the
    /// greedy flows' final packet counts from `counts` when the arrivals
    /// end. Returns early (with what it has) if the engine hangs up.
    fn run(
        mut self,
        tx: &SyncSender<Vec<StreamItem>>,
        counts: &Receiver<Vec<u64>>,
    ) -> FluidThreadSummary {
        let dur = self.job.duration_ps;
        let mut out: Vec<StreamItem> = Vec::with_capacity(BATCH);
        let mut greedy_open = true;
        loop {
            let ta = self.arrivals.next_time().unwrap_or(NO_TIME);
            let td = self.fluid.next_time().unwrap_or(NO_TIME);
            if greedy_open && ta.min(td) >= dur {
                // Everything before the end of the arrivals is done: say so
                // and learn how many packets each greedy flow really got.
                out.push(StreamItem {
                    order: dur,
                    t_ps: dur,
                    flow: END_OF_ARRIVALS,
                });
                if tx.send(std::mem::take(&mut out)).is_err() {
                    return self.summary();
                }
                let Ok(c) = counts.recv() else {
                    return self.summary();
                };
                self.apply_greedy_counts(&c);
                greedy_open = false;
                continue;
            }
            if ta == NO_TIME && td == NO_TIME {
                break;
            }
            if td <= ta {
                let Some(d) = self.fluid.pop() else { break };
                self.ids.free.push(d.id);
                out.push(StreamItem {
                    order: td,
                    t_ps: d.t_ps,
                    flow: d.flow,
                });
                if greedy_open && self.job.greedy[d.flow as usize] {
                    self.greedy_arrival(d.flow, d.t_ps);
                }
            } else if let Some(a) = self.arrivals.pop() {
                let id = self.ids.take();
                self.fluid.arrive(a.flow, a.len, a.t_ps, id);
                if let Some((t2, l2)) = self.job.gens[a.flow as usize].next(a.t_ps, a.len)
                    && t2 < dur
                {
                    self.arrivals.push(t2, a.flow, l2);
                }
            }
            if out.len() >= BATCH
                && tx
                    .send(std::mem::replace(&mut out, Vec::with_capacity(BATCH)))
                    .is_err()
            {
                return self.summary();
            }
        }
        if !out.is_empty() {
            let _ = tx.send(out);
        }
        self.summary()
    }
}

/// A flow as the engine sees it in the fluid system: packets given to it,
/// packets still there, and the oldest and newest of those (packet ids,
/// which the engine links through its packet records).
#[derive(Copy, Clone, Debug)]
pub(super) struct FluidFlowQueue {
    pub(super) arrived: u64,
    pub(super) queued: u32,
    pub(super) head: u32,
    pub(super) tail: u32,
}

/// The fluid stream's end-of-run result, when its premise held.
#[derive(Debug)]
pub(super) struct FluidStreamEnd {
    /// The fluid system left its fixed-point range.
    pub(super) overflow: bool,
    /// Bytes given to and served by the fluid system.
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    /// Per flow, packets still in the fluid system.
    pub(super) queued: Vec<u32>,
    /// The fluid thread's CPU time, ns.
    pub(super) cpu_ns: Option<u64>,
}

/// The engine's end of a fluid reference on another thread.
pub(super) struct FluidStream {
    rx: Receiver<Vec<StreamItem>>,
    buf: Vec<StreamItem>,
    pos: usize,
    /// Taken when the greedy flows' counts have been sent.
    counts: Option<Sender<Vec<u64>>>,
    /// The end-of-arrivals marker was passed: send the counts before
    /// waiting for more.
    counts_due: bool,
    /// The stream ended.
    done: bool,
    handle: Option<JoinHandle<FluidThreadSummary>>,
    /// Per flow, on one cache line with its neighbours.
    pub(super) flows: Vec<FluidFlowQueue>,
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    /// A packet was refused, or a departure came for a flow with nothing
    /// in the fluid system: the premise of the fluid thread failed (run
    /// again on one thread).
    pub(super) broken: bool,
}

impl FluidStream {
    /// Starts the fluid reference on its own thread: link rate `bps`, flow
    /// weights, clones of the engine's source generators, arrivals until
    /// `duration_ps` (`None` if the thread cannot be started: the engine
    /// then runs the fluid reference itself).
    pub(super) fn start(
        bps: u64,
        weights: &[u32],
        gens: &[Gen],
        duration_ps: u64,
    ) -> Option<FluidStream> {
        let n = weights.len();
        let (tx, rx) = std::sync::mpsc::sync_channel(DEPTH);
        let (ctx, crx) = std::sync::mpsc::channel();
        let job = FluidJob {
            bps,
            weights: weights.to_vec(),
            gens: gens.to_vec(),
            greedy: gens.iter().map(Gen::is_greedy).collect(),
            duration_ps,
        };
        let handle = std::thread::Builder::new()
            .name("pktsched-fluid".into())
            .spawn(move || FluidThread::new(job).run(&tx, &crx))
            .ok()?;
        Some(FluidStream {
            rx,
            buf: Vec::new(),
            pos: 0,
            counts: Some(ctx),
            counts_due: false,
            done: false,
            handle: Some(handle),
            flows: vec![
                FluidFlowQueue {
                    arrived: 0,
                    queued: 0,
                    head: NO_PACKET,
                    tail: NO_PACKET,
                };
                n
            ],
            bytes_in: 0,
            bytes_out: 0,
            broken: false,
        })
    }

    /// Order time of the next fluid departure if it is at or before
    /// `bound`, else `u64::MAX`. Blocks until the stream says.
    pub(super) fn peek(&mut self, bound: u64) -> u64 {
        loop {
            if let Some(it) = self.buf.get(self.pos) {
                if it.flow != END_OF_ARRIVALS {
                    return if it.order <= bound { it.order } else { NO_TIME };
                }
                if it.order > bound {
                    return NO_TIME;
                }
                self.pos += 1;
                self.counts_due = true;
                continue;
            }
            if self.done {
                return NO_TIME;
            }
            if self.counts_due
                && let Some(tx) = self.counts.take()
            {
                // Every event before the end of the arrivals is done, so
                // the counts are final; the fluid thread waits for them.
                let _ = tx.send(self.flows.iter().map(|f| f.arrived).collect());
            }
            match self.rx.recv() {
                Ok(b) => {
                    self.buf = b;
                    self.pos = 0;
                }
                Err(_) => self.done = true,
            }
        }
    }

    /// Takes the departure [`FluidStream::peek`] found.
    #[inline]
    pub(super) fn next_departure(&mut self) -> Option<StreamItem> {
        let it = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(it)
    }

    /// The departure `k` items after the next one, if already received.
    #[inline]
    pub(super) fn departure_ahead(&self, k: usize) -> Option<&StreamItem> {
        self.buf.get(self.pos + k)
    }

    /// Ends the stream: hangs up (a thread waiting for counts or room
    /// returns), joins the thread and checks the premise: nothing refused
    /// (`refused` packets), no departure without a packet, no extra greedy
    /// packets, and for a drained run the same bytes in and out on both
    /// ends. `None`: the premise failed, run again on one thread.
    pub(super) fn finish(mut self, refused: u64, drained: bool) -> Option<FluidStreamEnd> {
        drop(self.counts.take());
        let FluidStream {
            rx,
            handle,
            flows,
            bytes_in,
            bytes_out,
            broken,
            ..
        } = self;
        drop(rx);
        let sum = handle.and_then(|h| h.join().ok())?;
        let agree = !drained || (sum.bytes_in, sum.bytes_out) == (bytes_in, bytes_out);
        if broken || refused > 0 || sum.excess > 0 || !agree {
            return None;
        }
        Some(FluidStreamEnd {
            overflow: sum.overflow,
            bytes_in,
            bytes_out,
            queued: flows.iter().map(|f| f.queued).collect(),
            cpu_ns: sum.cpu_ns,
        })
    }
}
