//! What a run measured: the engine's raw [`Outcome`] and its per-packet
//! [`Departure`] rows, shared by the engine (which fills them) and by
//! [`crate::report`] and [`crate::plot`] (which read them).

use hdrhistogram::Histogram;

use crate::metrics::FlowStat;

/// Time bins of the per-flow rate plot.
pub const BINS: usize = 100;

/// One delivered packet (times in ps; `fluid` is `None` if the fluid
/// system had not finished it when the run stopped, or was off).
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Departure {
    /// Flow.
    pub flow: u32,
    /// Bytes.
    pub len: u32,
    /// Arrival, ps.
    pub arrival: u64,
    /// Departure, ps: the END of the packet's transmission (its last bit
    /// is on the wire), not the moment the scheduler picked it.
    pub departure: u64,
    /// GPS fluid finish, ps.
    pub fluid: Option<u64>,
}

/// Everything a run measured.
#[derive(Debug)]
pub struct Outcome {
    /// Per-flow measurements.
    pub flows: Vec<FlowStat>,
    /// Delay histogram of all packets (ns).
    pub hist: Histogram<u64>,
    /// Rows in departure order, if requested.
    pub departures: Vec<Departure>,
    /// Time of the last event, ps.
    pub end_ps: u64,
    /// Packets in the scheduler when the run stopped.
    pub queued_end: u64,
    /// Of `queued_end`: packets still in PSPAT client mailboxes (not yet
    /// seen by the scheduler).
    pub mailbox_end: u64,
    /// Of `queued_end`: packets the PSPAT arbiter released (the scheduler
    /// counted them as dequeued) that wait for a dispatcher or the NIC.
    pub released_end: u64,
    /// Packet on the wire when the run stopped.
    pub on_wire_end: u64,
    /// Packets the fluid system had not finished when the run stopped.
    pub fluid_pending: u64,
    /// Scheduler counters at the end.
    pub counters: pktsched_core::Counters,
    /// Ends of the link's busy periods (if requested).
    pub link_busy_ends: Vec<u64>,
    /// Ends of the fluid system's busy periods (if requested).
    pub fluid_busy_ends: Vec<u64>,
    /// Bytes the fluid system received and served.
    pub fluid_bytes: (u64, u64),
    /// Packets delivered.
    pub packets: u64,
    /// Whether the fluid reference ran on its own thread.
    pub fluid_threaded: bool,
    /// CPU time of the fluid reference's thread, ns (`None` if it ran on
    /// the simulation's thread, or the OS does not say).
    pub fluid_thread_cpu_ns: Option<u64>,
    /// The run was stopped early (a signal) at `end_ps`: everything above
    /// is what happened up to then, still fully accounted.
    pub stopped: bool,
}
