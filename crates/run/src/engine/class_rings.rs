//! The ingress receive side split by class: one kernel ring per class (a
//! [`ClassRx`]: AF_PACKET fanout group or AF_XDP sockets sharing a UMEM),
//! polled as one [`PacketIo`] so either engine uses it unchanged.
//!
//! The rings are numbered in polling order ([`ClassRingPlan`]): with
//! `algorithm = "prio"` the most urgent classes first, else file order.
//! Each receive call runs rounds of the core's LL-WFQ [`Poller`]: every
//! ring is visited in cyclic order and takes at most its budget, a round
//! at most [`DEVICE_BUDGET`] frames, and rounds follow one another until a
//! device budget is taken or a round finds nothing (work conserving: a
//! lone busy ring is not held to its budget). The most urgent
//! classes (lowest `prio`, or the heaviest weights) get the whole device
//! budget and a deep ring; the others a small budget and a small ring, so
//! a flood of bulk frames overflows its own ring in the kernel (counted as
//! that ring's `rx_kernel_drops`) instead of delaying the urgent ring's
//! frames or costing a copy first. Between two visits of a ring the others
//! take at most the sum of their budgets (the bound of
//! [`pktsched_core::ingress`]).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pktsched_core::Algorithm;
use pktsched_core::ingress::{IngressConfig, Poller, Rings, Take};
use pktsched_io::classify::Rule;
use pktsched_io::{BufPool, ClassRx, IoError, IoStats, PacketBuf, PacketIo};

use super::wait;
use crate::config::{RunConfig, SchedulerChoice};
use crate::reload::NeedsRestart;
use crate::stats::DeviceStats;

/// Frames one polling round takes at most (the engines' receive batch).
pub const DEVICE_BUDGET: u32 = super::rx::RX_BATCH as u32;
/// The budget of a class that is not among the most urgent.
pub const BULK_BUDGET: u32 = 8;
/// Receive ring slots of a most urgent class.
pub const URGENT_RING_FRAMES: u32 = 4096;
/// Receive ring slots of any other class: a quarter of an urgent ring,
/// still ~9 ms of 64-byte frames at 110 kpps (a 256-slot ring lost a
/// third of such a flow whenever the thread was descheduled for 2 ms on a
/// busy two-core machine).
pub const BULK_RING_FRAMES: u32 = 1024;
/// Receive frames an AF_XDP class group's UMEM holds (every ring must be
/// smaller, so one class cannot hold them all).
pub const CLASS_GROUP_RX_FRAMES: u32 = 8192;
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
        return Err(SingleRing("a single class, nothing to split".into()));
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

/// Whether a reload to `new` keeps the kernel's receive split of
/// `running` (the rings, their sizes and the filter that picks a frame's
/// ring are set when the ingress opens): the same classes in the same ring
/// order, the same most urgent classes, match rules and default class.
/// Classes' other settings (limit, rates, a weight or prio that keeps the
/// urgent set) change live. `Ok` when `running` has no class rings.
pub(crate) fn split_kept(running: &RunConfig, new: &RunConfig) -> Result<(), NeedsRestart> {
    let Ok(old) = class_ring_plan(running) else {
        return Ok(());
    };
    let restart = |field, old: String, new: String| Err(NeedsRestart { field, old, new });
    let names = |cfg: &RunConfig, plan: &ClassRingPlan| {
        plan.order
            .iter()
            .map(|&c| cfg.classes[c].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let plan = match class_ring_plan(new) {
        Ok(p) => p,
        Err(SingleRing(why)) => {
            return restart(
                "class rings (the ingress's per-class rings are set up at start)",
                format!("{} rings", old.order.len()),
                format!("one ring ({why})"),
            );
        }
    };
    let (was, now) = (names(running, &old), names(new, &plan));
    if was != now {
        return restart(
            "classes (the ingress's per-class rings, in polling order, are set up at start)",
            was,
            now,
        );
    }
    let urgent = |cfg: &RunConfig, plan: &ClassRingPlan| {
        plan.order
            .iter()
            .zip(&plan.budgets)
            .filter(|&(_, &b)| b == DEVICE_BUDGET)
            .map(|(&c, _)| cfg.classes[c].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (was, now) = (urgent(running, &old), urgent(new, &plan));
    if was != now {
        return restart(
            "most urgent classes (their rings' sizes and budgets are set up at start)",
            was,
            now,
        );
    }
    if old.default_ring != plan.default_ring {
        return restart(
            "default class (with per-class receive rings, set up at start)",
            running.classes[running.default_class()].name.clone(),
            new.classes[new.default_class()].name.clone(),
        );
    }
    let new_classes = crate::reload::by_name(new);
    if let Some((c, n)) = running
        .classes
        .iter()
        .filter_map(|c| Some((c, *new_classes.get(c.name.as_str())?)))
        .find(|(c, n)| c.rules != n.rules)
    {
        let rules = |r: &[pktsched_io::classify::Match]| {
            r.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        return restart(
            "class match (the kernel's filter that picks a frame's ring is loaded at start)",
            format!("{:?}: [{}]", c.name, rules(&c.rules)),
            format!("[{}]", rules(&n.rules)),
        );
    }
    if old != plan {
        return restart(
            "class rings (the ingress's per-class rings are set up at start)",
            format!("{old:?}"),
            format!("{plan:?}"),
        );
    }
    Ok(())
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

/// Waits shorter than this are the engines' waits for the emulated link
/// or a shaper (see [`ClassRings::arm`]).
const SHORT_WAIT: Duration = Duration::from_millis(1);

/// How often the kernel's drop counters are read.
const REFRESH_EVERY: Duration = Duration::from_millis(100);

/// A [`ClassRx`] polled by the LL-WFQ poller, as one receive device.
pub struct ClassRings {
    rx: Box<dyn ClassRx>,
    /// Each ring's descriptor (ring order), kept open for `pollfds`.
    fds: Vec<OwnedFd>,
    pollfds: Vec<libc::pollfd>,
    /// Ring `r` is a most urgent class's (the whole device budget).
    urgent: Vec<bool>,
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
        let rings = plan.order.len();
        if rx.classes() != rings || !(fds.is_empty() || fds.len() == rings) {
            return Err(IoError::Config {
                device,
                what: format!(
                    "class rings: {} receive rings and {} descriptors for {rings} classes; \
                     expected {rings} rings and {rings} descriptors (or none)",
                    rx.classes(),
                    fds.len()
                ),
            });
        }
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
            fds,
            pollfds,
            urgent: plan.budgets.iter().map(|&b| b == DEVICE_BUDGET).collect(),
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
            .map(|(s, name)| DeviceStats::from_io(&self.device, &format!("rx ring {name}"), s))
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

impl ClassRings {
    /// Which rings a wait of `timeout` watches (the others' `pollfd` gets
    /// a negative descriptor, which `ppoll` skips); returns how many (0:
    /// do not wait). A short wait (under [`SHORT_WAIT`]) while the
    /// emulated link is busy until its end (`link_busy`) is the engines'
    /// wait for the link: what arrives meanwhile is received at the next
    /// pass, before the next release, so only a frame on an empty urgent
    /// ring ends it early (its class goes first when the link frees; bulk
    /// arrivals under overload would only add wake-ups), and an urgent
    /// ring already holding frames ends it at once. Any other wait (idle,
    /// or a shaper's: the link is free, so a frame of any class may leave
    /// at once) does not start while any ring holds frames, and then
    /// watches every ring.
    fn arm(&mut self, timeout: Duration, link_busy: bool) -> usize {
        let link_only = link_busy && timeout < SHORT_WAIT;
        let (mut any_holds, mut urgent_holds) = (false, false);
        for (ring, &urgent) in self.urgent.iter().enumerate() {
            if self.rx.waiting(ring).is_some_and(|n| n > 0) {
                any_holds = true;
                urgent_holds |= urgent;
            }
        }
        if (link_only && urgent_holds) || (!link_only && any_holds) {
            return 0;
        }
        let mut armed = 0;
        for ((p, fd), &urgent) in self.pollfds.iter_mut().zip(&self.fds).zip(&self.urgent) {
            let watch = !link_only || urgent;
            p.fd = if watch { fd.as_raw_fd() } else { -1 };
            armed += usize::from(watch);
        }
        armed
    }

    /// Waits until a frame arrives or `timeout` has passed, as
    /// `ClassRings::arm` says for a link that is (or is not) busy until
    /// the timeout; returns whether it slept (false: a ring already held
    /// frames, nothing was waited for).
    pub fn wait_due(&mut self, timeout: Duration, link_busy: bool) -> Result<bool, IoError> {
        self.refresh_if_due();
        let waited = if !self.pollfds.is_empty() {
            if self.arm(timeout, link_busy) == 0 {
                return Ok(false);
            }
            wait::any_readable_within(&mut self.pollfds, timeout).map(|_| true)
        } else if timeout >= SHORT_WAIT {
            return self.rx.wait(timeout).map(|()| true);
        } else {
            // A ring that cannot tell counts as holding frames.
            let any = self.any_waiting() != Some(false);
            if !any {
                std::thread::sleep(timeout);
            }
            Ok(!any)
        };
        waited.map_err(|e| IoError::Config {
            device: self.device.clone(),
            what: format!("ppoll on the class rings: {e}"),
        })
    }

    /// Whether any ring holds frames, read in memory; `None` when a ring
    /// cannot tell ([`ClassRx::waiting`]).
    pub fn any_waiting(&self) -> Option<bool> {
        let mut any = false;
        for ring in 0..self.names.len() {
            any |= self.rx.waiting(ring)? > 0;
        }
        Some(any)
    }

    #[cfg(test)]
    fn armed(&self) -> Vec<bool> {
        self.pollfds.iter().map(|p| p.fd >= 0).collect()
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
    /// Polling rounds until [`DEVICE_BUDGET`] frames are taken or a round
    /// finds none (the last round may take up to one device budget more);
    /// with a smaller `max`, the rings in order up to `max` frames.
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
            // A device poll: rounds until the device budget is used or a
            // round finds nothing. The budgets bound what the others take
            // between two visits of a ring, not what one ring may take when
            // the others are idle (work conserving).
            self.poller.poll_device(&mut round, &mut self.visits);
        } else {
            for ring in 0..self.names.len() {
                let left = max - (round.out.len() - before);
                if left == 0 {
                    break;
                }
                round.take(ring, left);
            }
        }
        let (got, error) = (round.out.len() - before, round.error);
        // The backend's kick (busy poll, need-wakeup), once per call and
        // also when nothing came: a stalled ring needs it most.
        self.rx.end_round();
        match error {
            Some(e) if got == 0 => Err(e),
            _ => Ok(got),
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

    /// Waits until a frame arrives or `timeout` has passed. With the
    /// rings' descriptors, in `ppoll` with nanosecond precision on the
    /// rings `ClassRings::arm` picks (taking the link as busy: use
    /// [`ClassRings::wait_due`] to say otherwise); without, through the
    /// [`ClassRx`]'s own millisecond wait, and a shorter wait sleeps
    /// unless a ring has frames.
    fn wait(&mut self, timeout: Duration) -> Result<(), IoError> {
        self.wait_due(timeout, true).map(|_| ())
    }

    /// The rings' counters summed.
    fn stats(&self) -> IoStats {
        let mut t = IoStats {
            rx_ring: self
                .stats
                .first()
                .map_or_else(Default::default, |s| s.rx_ring),
            ..IoStats::default()
        };
        for s in &self.stats {
            t.rx_packets += s.rx_packets;
            t.rx_bytes += s.rx_bytes;
            t.rx_kernel_drops += s.rx_kernel_drops;
            t.rx_no_buffer += s.rx_no_buffer;
            t.rx_oversize += s.rx_oversize;
            t.rx_ring_full += s.rx_ring_full;
            t.rx_fill_empty += s.rx_fill_empty;
            t.rx_freezes += s.rx_freezes;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use super::*;
    use crate::config::parse;

    const PRIO: &str = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\n\n\
        [scheduler]\nalgorithm = \"prio\"\n\n\
        [[class]]\nname = \"bulk\"\nprio = 2\ndefault = true\n\n\
        [[class]]\nname = \"voip\"\nprio = 0\nmatch = [{ dport = 5000 }]\n\n\
        [[class]]\nname = \"web\"\nprio = 1\nmatch = [{ dport = 80 }, { dport = 443 }]\n";

    #[test]
    fn prio_classes_are_polled_most_urgent_first_with_the_whole_budget() {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        assert_eq!(plan.order, vec![1, 2, 0]); // voip, web, bulk
        assert_eq!(plan.ring_of, vec![2, 0, 1]);
        assert_eq!(plan.budgets, vec![DEVICE_BUDGET, BULK_BUDGET, BULK_BUDGET]);
        assert_eq!(
            plan.frames,
            vec![URGENT_RING_FRAMES, BULK_RING_FRAMES, BULK_RING_FRAMES]
        );
        assert_eq!(plan.default_ring, 2);
        let rings: Vec<(u16, String)> = plan
            .rules
            .iter()
            .map(|r| (r.class, r.matches.to_string()))
            .collect();
        assert_eq!(
            rings,
            vec![
                (0, "dport 5000".to_string()),
                (1, "dport 80".to_string()),
                (1, "dport 443".to_string())
            ]
        );
    }

    /// With class rings, a reload keeps the kernel's split or is refused
    /// by name; settings outside the split change live.
    #[test]
    fn a_reload_that_needs_another_kernel_split_takes_a_restart() {
        let running = parse(PRIO, "t.toml", None).expect("config");
        let reload = |edit: &dyn Fn(&str) -> String| {
            split_kept(
                &running,
                &parse(&edit(PRIO), "t.toml", None).expect("config"),
            )
        };
        assert_eq!(reload(&|s| s.to_string()), Ok(()));
        // A limit, or a prio that keeps the order and the urgent class.
        assert_eq!(
            reload(&|s| s.replace("prio = 2", "prio = 3\nlimit = 50")),
            Ok(())
        );
        let refused = |edit: &dyn Fn(&str) -> String| reload(edit).expect_err("refused");
        let e = refused(&|s| {
            format!("{s}\n[[class]]\nname = \"ssh\"\nprio = 1\nmatch = [{{ dport = 22 }}]\n")
        });
        assert!(e.field.starts_with("classes"), "{e}");
        assert_eq!(
            (e.old.as_str(), e.new.as_str()),
            ("voip, web, bulk", "voip, web, ssh, bulk")
        );
        let e = refused(&|s| s.replace("prio = 1", "prio = 0"));
        assert!(e.field.starts_with("most urgent classes"), "{e}");
        assert_eq!((e.old.as_str(), e.new.as_str()), ("voip", "voip, web"));
        let e = refused(&|s| s.replace("dport = 5000", "dport = 5060"));
        assert!(e.field.starts_with("class match"), "{e}");
        assert!(
            e.to_string().contains("\"voip\": [dport 5000]") && e.new == "[dport 5060]",
            "{e}"
        );
        let e = refused(&|s| {
            s.replace("default = true\n", "match = [{ dport = 9 }]\n")
                .replace("name = \"web\"", "name = \"web\"\ndefault = true")
        });
        assert!(e.field.starts_with("default class"), "{e}");
        assert!(e.to_string().contains("takes a restart"), "{e}");
        // A renamed class: the rings' labels would be wrong.
        let e = refused(&|s| s.replace("\"web\"", "\"www\""));
        assert!(e.field.starts_with("classes"), "{e}");
        // Without class rings (one class) there is nothing to keep.
        let one = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\n\
                   [[class]]\nname = \"a\"\ndefault = true\n";
        let one = parse(one, "t.toml", None).expect("config");
        assert_eq!(split_kept(&one, &running), Ok(()));
    }

    #[test]
    fn weighted_classes_keep_file_order_and_the_heaviest_get_the_budget() {
        let src = PRIO
            .replace("\"prio\"", "\"drr\"")
            .replace("prio = 2", "weight = 1")
            .replace("prio = 0", "weight = 10")
            .replace("prio = 1", "weight = 10");
        let cfg = parse(&src, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        assert_eq!(plan.order, vec![0, 1, 2]);
        assert_eq!(
            plan.budgets,
            vec![BULK_BUDGET, DEVICE_BUDGET, DEVICE_BUDGET]
        );
        assert_eq!(plan.default_ring, 0);
    }

    #[test]
    fn one_class_or_too_many_keep_one_ring_and_say_why() {
        let one = "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\n\n\
                   [[class]]\nname = \"a\"\ndefault = true\n";
        let cfg = parse(one, "t.toml", None).expect("config");
        let why = class_ring_plan(&cfg).expect_err("one class").0;
        assert!(why.contains("single class"), "{why}");
        let mut many = one.to_string();
        for i in 0..MAX_CLASS_RINGS {
            many += &format!(
                "\n[[class]]\nname = \"c{i}\"\nmatch = [{{ dport = {} }}]\n",
                1000 + i
            );
        }
        let cfg = parse(&many, "t.toml", None).expect("config");
        let why = class_ring_plan(&cfg).expect_err("too many").0;
        assert!(
            why.contains("65 classes") && why.contains("at most 64"),
            "{why}"
        );
    }

    /// Rings in memory: each a queue of frames (their first byte names
    /// the ring), with a slot limit beyond which arrivals are dropped.
    /// Each ring's frames, shared with the test.
    type Frames = Arc<Mutex<Vec<VecDeque<Vec<u8>>>>>;

    struct MemRings {
        rings: Frames,
        received: Vec<u64>,
        /// `end_round` calls, shared with the test.
        rounds_ended: Arc<std::sync::atomic::AtomicUsize>,
    }

    fn mem_rings(rings: Vec<VecDeque<Vec<u8>>>) -> (MemRings, Frames) {
        let shared = Arc::new(Mutex::new(rings));
        let n = shared.lock().expect("rings").len();
        let r = MemRings {
            rings: shared.clone(),
            received: vec![0; n],
            rounds_ended: Arc::default(),
        };
        (r, shared)
    }

    impl ClassRx for MemRings {
        fn classes(&self) -> usize {
            self.received.len()
        }
        fn recv_class(
            &mut self,
            class: usize,
            pool: &BufPool,
            out: &mut Vec<PacketBuf>,
            max: usize,
        ) -> Result<usize, IoError> {
            let mut n = 0;
            while n < max {
                let mut rings = self.rings.lock().expect("rings");
                let Some(f) = rings.get_mut(class).and_then(|r| r.pop_front()) else {
                    break;
                };
                let mut b = pool.get().expect("buffer");
                assert!(b.fill(&f));
                out.push(b);
                n += 1;
            }
            self.received[class] += n as u64;
            Ok(n)
        }
        fn waiting(&self, class: usize) -> Option<usize> {
            Some(self.rings.lock().expect("rings")[class].len())
        }
        fn end_round(&mut self) {
            self.rounds_ended
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        fn wait(&mut self, _timeout: Duration) -> Result<(), IoError> {
            Ok(())
        }
        fn class_stats(&mut self) -> Vec<IoStats> {
            self.received
                .iter()
                .map(|&r| IoStats {
                    rx_packets: r,
                    ..IoStats::default()
                })
                .collect()
        }
    }

    /// The rings' in-memory count: any ring holding frames, none, or a
    /// backend that cannot tell.
    #[test]
    fn any_waiting_reads_every_ring_and_admits_a_ring_that_cannot_tell() {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("three classes: class rings");
        let (mem, frames) = mem_rings(vec![VecDeque::new(); 3]);
        let rings = ClassRings::new(Box::new(mem), Vec::new(), &plan, &cfg).expect("rings");
        assert_eq!(rings.any_waiting(), Some(false));
        frames.lock().expect("rings")[2].push_back(vec![0u8; 60]);
        assert_eq!(rings.any_waiting(), Some(true), "the last ring holds one");
        struct Blind;
        impl ClassRx for Blind {
            fn classes(&self) -> usize {
                3
            }
            fn recv_class(
                &mut self,
                _: usize,
                _: &BufPool,
                _: &mut Vec<PacketBuf>,
                _: usize,
            ) -> Result<usize, IoError> {
                Ok(0)
            }
            fn wait(&mut self, _: Duration) -> Result<(), IoError> {
                Ok(())
            }
            fn class_stats(&mut self) -> Vec<IoStats> {
                vec![IoStats::default(); 3]
            }
        }
        let blind = ClassRings::new(Box::new(Blind), Vec::new(), &plan, &cfg).expect("rings");
        assert_eq!(blind.any_waiting(), None);
    }

    /// Every receive ends with the backend's round end (the AF_XDP group
    /// makes its busy-poll or need-wakeup kick there, and nowhere else),
    /// also a receive that finds nothing.
    #[test]
    fn every_receive_ends_the_backends_round() {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        let (rings, _shared) = mem_rings(vec![
            (0..3).map(|_| vec![0u8; 60]).collect(),
            VecDeque::new(),
            VecDeque::new(),
        ]);
        let ended = rings.rounds_ended.clone();
        let mut dev = ClassRings::new(Box::new(rings), Vec::new(), &plan, &cfg).expect("rings");
        let pool = BufPool::new(64, 2048).expect("pool");
        let mut out = Vec::new();
        assert_eq!(dev.recv_batch(&pool, &mut out, 64).expect("rounds"), 3);
        assert_eq!(dev.recv_batch(&pool, &mut out, 8).expect("rings"), 0);
        assert_eq!(ended.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    /// Three rings with a socket pair each: the `ClassRings` waits on
    /// one end, the test makes a ring "readable" through the other.
    fn rings_with_fds(
        frames: Vec<VecDeque<Vec<u8>>>,
    ) -> (ClassRings, Vec<std::os::unix::net::UnixDatagram>) {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        let (rings, _shared) = mem_rings(frames);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let (a, b) = std::os::unix::net::UnixDatagram::pair().expect("pair");
            ours.push(OwnedFd::from(b));
            theirs.push(a);
        }
        let dev = ClassRings::new(Box::new(rings), ours, &plan, &cfg).expect("rings");
        (dev, theirs)
    }

    /// A link-time wait (short) watches the urgent ring only, and not at
    /// all when it holds frames; an idle wait (long) watches every ring,
    /// and not at all when any ring holds frames.
    #[test]
    fn a_short_wait_watches_the_urgent_ring_and_a_long_one_every_ring() {
        let short = Duration::from_micros(300);
        let long = Duration::from_millis(5);
        let (mut dev, _peers) = rings_with_fds(vec![VecDeque::new(); 3]);
        assert_eq!(dev.arm(short, true), 1);
        assert_eq!(dev.armed(), vec![true, false, false]);
        assert_eq!(dev.arm(long, true), 3);
        assert_eq!(dev.armed(), vec![true, true, true]);
        let bulk_holds = vec![
            VecDeque::new(),
            VecDeque::new(),
            VecDeque::from([vec![2u8; 60]]),
        ];
        let (mut dev, _peers) = rings_with_fds(bulk_holds);
        assert_eq!(
            dev.arm(short, true),
            1,
            "bulk frames wait for the link's time"
        );
        assert_eq!(dev.armed(), vec![true, false, false]);
        assert_eq!(dev.arm(long, true), 0, "an idle wait takes them now");
        let urgent_holds = vec![
            VecDeque::from([vec![0u8; 60]]),
            VecDeque::new(),
            VecDeque::new(),
        ];
        let (mut dev, _peers) = rings_with_fds(urgent_holds);
        assert_eq!(dev.arm(short, true), 0);
        assert_eq!(dev.arm(long, true), 0);
    }

    /// A short wait a shaper set (the link is free) watches every ring
    /// and does not start while any ring holds frames: a frame of another
    /// class could leave at once.
    #[test]
    fn a_short_wait_for_a_shaper_watches_every_ring() {
        let short = Duration::from_micros(300);
        let (mut dev, _peers) = rings_with_fds(vec![VecDeque::new(); 3]);
        assert_eq!(dev.arm(short, false), 3);
        assert_eq!(dev.armed(), vec![true, true, true]);
        let bulk_holds = vec![
            VecDeque::new(),
            VecDeque::new(),
            VecDeque::from([vec![2u8; 60]]),
        ];
        let (mut dev, peers) = rings_with_fds(bulk_holds);
        assert_eq!(
            dev.arm(short, false),
            0,
            "a waiting bulk frame may leave now"
        );
        assert!(
            !dev.wait_due(short, false).expect("wait"),
            "it did not sleep"
        );
        // The engines reach it through their port.
        let mut port = super::super::ports::Port::new(dev, "d0", "rx");
        assert!(
            !port.wait_due(short, false),
            "the port's wait did not sleep"
        );
        assert!(
            port.wait_due(short, true),
            "a link wait ignores bulk frames"
        );
        let (mut dev, _p) = rings_with_fds(vec![VecDeque::new(); 3]);
        drop(peers);
        let started = Instant::now();
        assert!(dev.wait_due(short, false).expect("wait"), "it slept");
        assert!(started.elapsed() >= short);
    }

    /// More descriptors than rings is refused, naming the counts.
    #[test]
    fn descriptors_not_matching_the_rings_are_an_error() {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        let (rings, _shared) = mem_rings(vec![VecDeque::new(); 3]);
        let fds = (0..4)
            .map(|_| {
                let (_, b) = std::os::unix::net::UnixDatagram::pair().expect("pair");
                OwnedFd::from(b)
            })
            .collect();
        let e = ClassRings::new(Box::new(rings), fds, &plan, &cfg).expect_err("4 fds, 3 rings");
        let text = e.to_string();
        assert!(
            text.contains("4 descriptors") && text.contains("3 classes"),
            "{text}"
        );
    }

    /// The ppoll itself: a readable bulk ring does not end a short wait,
    /// any ring's frame ends a long one.
    #[test]
    fn a_short_wait_ignores_bulk_arrivals_and_a_long_wait_ends_on_any() {
        let (mut dev, peers) = rings_with_fds(vec![VecDeque::new(); 3]);
        peers[2].send(b"x").expect("send"); // a bulk frame arrives
        let started = Instant::now();
        dev.wait(Duration::from_micros(300)).expect("wait");
        assert!(
            started.elapsed() >= Duration::from_micros(300),
            "a bulk arrival ended a link-time wait"
        );
        let started = Instant::now();
        dev.wait(Duration::from_secs(20)).expect("wait");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the bulk frame did not end an idle wait"
        );
    }

    #[test]
    fn a_round_takes_the_urgent_ring_whole_and_bulk_rings_by_their_budget() {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        let frame = |ring: u8| vec![ring; 60];
        let (rings, shared) = mem_rings(vec![
            (0..10).map(|_| frame(0)).collect(),
            (0..100).map(|_| frame(1)).collect(),
            (0..100).map(|_| frame(2)).collect(),
        ]);
        let mut dev = ClassRings::new(Box::new(rings), Vec::new(), &plan, &cfg).expect("rings");
        let pool = BufPool::new(1024, 2048).expect("pool");
        let mut out = Vec::new();
        let n = dev.recv_batch(&pool, &mut out, 64).expect("rounds");
        let firsts: Vec<u8> = out.iter().map(|b| b.as_slice()[0]).collect();
        // Round 1: the urgent ring whole, each bulk ring its budget; then
        // rounds of bulk budgets until exactly a device budget is taken
        // (the last visit cut to what is left of it).
        let b = BULK_BUDGET as usize;
        let mut want = vec![0u8; 10];
        while want.len() < DEVICE_BUDGET as usize {
            want.extend(std::iter::repeat_n(1u8, b));
            want.extend(std::iter::repeat_n(2u8, b));
        }
        want.truncate(DEVICE_BUDGET as usize);
        assert_eq!(n, want.len());
        assert_eq!(
            firsts, want,
            "urgent ring first, whole; then each bulk ring its budget"
        );
        let taken = |ring: u8| want.iter().filter(|&&r| r == ring).count() as u64;
        let bulk = [taken(1), taken(2)];
        for b in out.drain(..) {
            pool.put(b);
        }
        // The board shows each ring's frames under its class's name.
        dev.refresh();
        let board = dev.board().read();
        let by_role: Vec<(String, u64)> = board
            .iter()
            .map(|d| (d.role.clone(), d.rx_packets))
            .collect();
        assert_eq!(
            by_role,
            vec![
                ("rx ring voip".to_string(), 10),
                ("rx ring web".to_string(), bulk[0]),
                ("rx ring bulk".to_string(), bulk[1])
            ]
        );
        assert_eq!(dev.stats().rx_packets, n as u64);
        // An urgent frame arriving now waits behind at most the bulk
        // rings' budgets once (the bound), not behind their backlog.
        shared.lock().expect("rings")[0].push_back(frame(0));
        assert!(dev.recv_batch(&pool, &mut out, 64).expect("rounds") > 0);
        let at = out
            .iter()
            .position(|b| b.as_slice()[0] == 0)
            .expect("urgent frame");
        assert!(at <= 2 * b, "the urgent frame came {at}th");
        for b in out.drain(..) {
            pool.put(b);
        }
    }

    #[test]
    fn a_receive_smaller_than_a_round_takes_rings_in_order_up_to_it() {
        let cfg = parse(PRIO, "t.toml", None).expect("config");
        let plan = class_ring_plan(&cfg).expect("plan");
        let (rings, _) = mem_rings(vec![
            (0..3).map(|_| vec![0u8; 60]).collect(),
            (0..9).map(|_| vec![1u8; 60]).collect(),
            VecDeque::new(),
        ]);
        let mut dev = ClassRings::new(Box::new(rings), Vec::new(), &plan, &cfg).expect("rings");
        let pool = BufPool::new(64, 2048).expect("pool");
        let mut out = Vec::new();
        assert_eq!(dev.recv_batch(&pool, &mut out, 5).expect("recv"), 5);
        let firsts: Vec<u8> = out.iter().map(|b| b.as_slice()[0]).collect();
        assert_eq!(firsts, vec![0, 0, 0, 1, 1]);
        for b in out.drain(..) {
            pool.put(b);
        }
    }
}
