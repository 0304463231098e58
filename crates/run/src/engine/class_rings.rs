//! The ingress receive side split by class: one kernel ring per class (a
//! [`ClassRx`]: AF_PACKET fanout group or AF_XDP sockets sharing a UMEM),
//! polled as one [`PacketIo`] so either engine uses it unchanged.
//!
//! The rings are numbered in polling order ([`ClassRingPlan`]): with
//! `algorithm = "prio"` the most urgent classes first, else file order.
//! Each receive call is one round of the core's LL-WFQ
//! [`Poller`]: every ring is visited in cyclic order and takes at most its
//! budget, the round at most [`DEVICE_BUDGET`] frames. The most urgent
//! classes (lowest `prio`, or the heaviest weights) get the whole device
//! budget and a deep ring; the others a small budget and a small ring, so
//! a flood of bulk frames overflows its own ring in the kernel (counted as
//! that ring's `rx_kernel_drops`) instead of delaying the urgent ring's
//! frames or costing a copy first. Between two visits of a ring the others
//! take at most the sum of their budgets (the bound of
//! [`pktsched_core::ingress`]).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pktsched_core::Algorithm;
use pktsched_core::ingress::{IngressConfig, Poller, Rings, Take};
use pktsched_io::classify::Rule;
use pktsched_io::{BufPool, ClassRx, IoError, IoStats, PacketBuf, PacketIo};

use super::wait;
use crate::config::{RunConfig, SchedulerChoice};
use crate::stats::DeviceStats;

/// Frames one polling round takes at most (the engines' receive batch).
pub const DEVICE_BUDGET: u32 = super::rx::RX_BATCH as u32;
/// The budget of a class that is not among the most urgent.
pub const BULK_BUDGET: u32 = 8;
/// Receive ring slots of a most urgent class.
pub const URGENT_RING_FRAMES: u32 = 2048;
/// Receive ring slots of any other class.
pub const BULK_RING_FRAMES: u32 = 256;
/// Most classes the split receive side takes (the poller's limit); with
/// more, the ingress keeps one ring.
pub const MAX_CLASS_RINGS: usize = pktsched_core::ingress::MAX_CLASSES;

/// One ring per class, in polling order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassRingPlan {
    /// `order[ring]` is the class (index in the config) ring `ring` holds.
    pub order: Vec<usize>,
    /// `ring_of[class]`: the inverse of `order`.
    pub ring_of: Vec<usize>,
    /// Each ring's budget (frames per visit).
    pub budgets: Vec<u32>,
    /// Each ring's slots.
    pub frames: Vec<u32>,
    /// The classifier's rules with ring numbers as classes.
    pub rules: Vec<Rule>,
    /// The default class's ring.
    pub default_ring: u16,
}

/// Why the ingress keeps one receive ring for every class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleRing(pub String);

/// The per-class rings of `cfg`, or why there are none: with one class
/// there is nothing to split, and more than [`MAX_CLASS_RINGS`] classes
/// are past the poller's limit.
pub fn class_ring_plan(cfg: &RunConfig) -> Result<ClassRingPlan, SingleRing> {
    let n = cfg.classes.len();
    if n < 2 {
        return Err(SingleRing("one class: one receive ring".into()));
    }
    if n > MAX_CLASS_RINGS {
        return Err(SingleRing(format!(
            "{n} classes: per-class receive rings take at most {MAX_CLASS_RINGS}; one ring"
        )));
    }
    let prio = matches!(cfg.scheduler, SchedulerChoice::Algorithm(Algorithm::Prio));
    let mut order: Vec<usize> = (0..n).collect();
    if prio {
        order.sort_by_key(|&c| cfg.classes[c].prio); // stable: file order within a level
    }
    let urgent = |c: usize| {
        let class = &cfg.classes[c];
        if prio {
            class.prio == cfg.classes[order[0]].prio
        } else {
            class.weight == cfg.classes.iter().map(|k| k.weight).max().unwrap_or(0)
        }
    };
    let mut ring_of = vec![0; n];
    for (ring, &class) in order.iter().enumerate() {
        ring_of[class] = ring;
    }
    let (budgets, frames) = order
        .iter()
        .map(|&c| match urgent(c) {
            true => (DEVICE_BUDGET, URGENT_RING_FRAMES),
            false => (BULK_BUDGET, BULK_RING_FRAMES),
        })
        .unzip();
    let rules = cfg
        .classes
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            let ring = ring_of[i] as u16;
            c.rules.iter().map(move |m| Rule {
                class: ring,
                matches: m.clone(),
            })
        })
        .collect();
    Ok(ClassRingPlan {
        default_ring: ring_of[cfg.default_class()] as u16,
        order,
        ring_of,
        budgets,
        frames,
        rules,
    })
}

/// Each class ring's counters as last refreshed, for the stats (role
/// `rx ring <class>`).
#[derive(Debug, Clone, Default)]
pub struct RingBoard(Arc<Mutex<Vec<DeviceStats>>>);

impl RingBoard {
    /// The counters now (empty before the first refresh).
    pub fn read(&self) -> Vec<DeviceStats> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn write(&self, v: Vec<DeviceStats>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = v;
    }
}

/// How often the kernel's drop counters are read.
const REFRESH_EVERY: Duration = Duration::from_millis(100);

/// A [`ClassRx`] polled by the LL-WFQ poller, as one receive device.
pub struct ClassRings {
    rx: Box<dyn ClassRx>,
    /// Kept open for `pollfds`.
    _fds: Vec<OwnedFd>,
    pollfds: Vec<libc::pollfd>,
    poller: Poller,
    visits: Vec<Take>,
    device: String,
    /// Ring `r`'s class name.
    names: Vec<String>,
    stats: Vec<IoStats>,
    refreshed: Instant,
    board: RingBoard,
}

impl std::fmt::Debug for ClassRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassRings")
            .field("device", &self.device)
            .field("rings", &self.names)
            .finish_non_exhaustive()
    }
}

impl ClassRings {
    /// Polls `rx` (whose ring `r` holds class `plan.order[r]` of `cfg`)
    /// as `plan` says; `fds` are the rings' descriptors to wait on.
    pub fn new(
        rx: Box<dyn ClassRx>,
        fds: Vec<OwnedFd>,
        plan: &ClassRingPlan,
        cfg: &RunConfig,
    ) -> Result<ClassRings, IoError> {
        let device = cfg.link.ingress.clone();
        let poller = IngressConfig::ll_wfq(&plan.budgets)
            .with_device_budget(DEVICE_BUDGET)
            .plan()
            .map(Poller::from_plan)
            .map_err(|e| IoError::Config {
                device: device.clone(),
                what: format!("class rings: {e}"),
            })?;
        let names = plan
            .order
            .iter()
            .map(|&c| cfg.classes[c].name.clone())
            .collect();
        let pollfds = fds.iter().map(|f| wait::pollfd_for(f.as_fd())).collect();
        let mut rings = ClassRings {
            rx,
            _fds: fds,
            pollfds,
            poller,
            visits: Vec::with_capacity(MAX_CLASS_RINGS),
            device,
            names,
            stats: Vec::new(),
            refreshed: Instant::now(),
            board: RingBoard::default(),
        };
        rings.refresh();
        Ok(rings)
    }

    /// The board the rings' counters are published on.
    pub fn board(&self) -> RingBoard {
        self.board.clone()
    }

    /// Reads the kernel's counters and publishes them.
    fn refresh(&mut self) {
        self.stats = self.rx.class_stats();
        self.refreshed = Instant::now();
        let v = self
            .stats
            .iter()
            .zip(&self.names)
            .map(|(s, name)| DeviceStats {
                device: self.device.clone(),
                role: format!("rx ring {name}"),
                rx_packets: s.rx_packets,
                rx_kernel_drops: s.rx_kernel_drops,
                rx_no_buffer: s.rx_no_buffer,
                rx_oversize: s.rx_oversize,
                ..DeviceStats::default()
            })
            .collect();
        self.board.write(v);
    }

    fn refresh_if_due(&mut self) {
        if self.refreshed.elapsed() >= REFRESH_EVERY {
            self.refresh();
        }
    }
}

impl Drop for ClassRings {
    /// The last counters stay on the board after the rings close.
    fn drop(&mut self) {
        self.refresh();
    }
}

/// One round's view of the rings for the poller.
struct Round<'a> {
    rx: &'a mut dyn ClassRx,
    pool: &'a BufPool,
    out: &'a mut Vec<PacketBuf>,
    error: Option<IoError>,
}

impl Rings for Round<'_> {
    fn waiting(&self, ring: usize) -> usize {
        // A ring that cannot tell is tried (an empty receive is cheap).
        self.rx.waiting(ring).unwrap_or(1)
    }

    fn take(&mut self, ring: usize, max: usize) -> usize {
        match self.rx.recv_class(ring, self.pool, self.out, max) {
            Ok(n) => n,
            Err(e) => {
                self.error.get_or_insert(e);
                0
            }
        }
    }
}

impl PacketIo for ClassRings {
    /// One polling round (at most `max` and [`DEVICE_BUDGET`] frames; a
    /// smaller `max` is honoured by the rings' budgets only up to it).
    fn recv_batch(
        &mut self,
        pool: &BufPool,
        out: &mut Vec<PacketBuf>,
        max: usize,
    ) -> Result<usize, IoError> {
        self.refresh_if_due();
        let before = out.len();
        let mut round = Round {
            rx: self.rx.as_mut(),
            pool,
            out,
            error: None,
        };
        if max >= DEVICE_BUDGET as usize {
            self.poller.poll(&mut round, &mut self.visits);
        } else {
            for ring in 0..self.names.len() {
                let left = max - (round.out.len() - before);
                if left == 0 {
                    break;
                }
                round.take(ring, left);
            }
        }
        match round.error {
            Some(e) if round.out.len() == before => Err(e),
            _ => Ok(round.out.len() - before),
        }
    }

    fn send_batch(
        &mut self,
        _frames: &mut Vec<PacketBuf>,
        _pool: &BufPool,
    ) -> Result<usize, IoError> {
        Err(IoError::Config {
            device: self.device.clone(),
            what: "the per-class receive rings do not transmit".into(),
        })
    }

    /// Waits on every ring at once, with nanosecond precision.
    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        self.refresh_if_due();
        match wait::any_readable_within(&mut self.pollfds, timeout) {
            Ok(_) => Ok(()),
            Err(e) => Err(IoError::Config {
                device: self.device.clone(),
                what: format!("ppoll on the class rings: {e}"),
            }),
        }
    }

    /// The rings' counters summed.
    fn stats(&self) -> IoStats {
        let mut t = IoStats::default();
        for s in &self.stats {
            t.rx_packets += s.rx_packets;
            t.rx_bytes += s.rx_bytes;
            t.rx_kernel_drops += s.rx_kernel_drops;
            t.rx_no_buffer += s.rx_no_buffer;
            t.rx_oversize += s.rx_oversize;
        }
        t
    }
}
