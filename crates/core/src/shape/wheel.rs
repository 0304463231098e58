//! Timing wheels: Carousel's single wheel and FlowBundler's multi-level
//! timing wheel (MLTW), one implementation with 1 or many levels.

use super::{Entry, ShapeConfigError, TimeQueue};
use crate::bitmap::HierBitmap;
use crate::units::Nanos;

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    e: Entry,
    next: u32,
    /// Level of the flow's own wheel (where the entry goes back to if it
    /// was parked in a coarser wheel and comes out before its EDT).
    level: u8,
    /// Filed at its floor slot in a coarser wheel (see [`Wheels::park`]):
    /// its slot may come before its EDT.
    parked: bool,
}

/// `⌈edt / 2^s⌉` (`s < 64`, by the configuration check): for `edt >= 1`
/// it is `⌊(edt − 1) / 2^s⌋ + 1`, a subtraction, a shift and an increment
/// that cannot overflow anywhere up to `u64::MAX` (no mask to build, no
/// overflow test); `edt = 0` (a zero-length packet at time 0) is 0.
#[inline(always)]
fn ceil_slot(edt: u64, s: u32) -> u64 {
    if edt == 0 {
        return 0;
    }
    ((edt - 1) >> s) + 1
}

/// Where [`Wheels::locate`] files an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Already due: the due list.
    Due,
    /// Level and slot (absolute slot number) of its ceil slot time.
    Slot(usize, u64),
    /// Beyond its own wheel: parked in a coarser level at its floor slot.
    Parked(usize, u64),
}

/// A filing prepared by [`TimeQueue::reserve`] on [`Wheels`]: the entry's
/// node and where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WheelTicket {
    node: u32,
    at: Place,
}

/// Most levels a [`Wheels`] may have (see [`WheelConfig::levels`]).
const MAX_LEVELS: usize = 48;

/// The level [`Wheels::park_place`] names when no wheel reaches an entry.
const UNREACHED: usize = usize::MAX;

/// Parameters of a [`Wheels`] structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WheelConfig {
    /// Slot width of level 0 in ns; a power of two (1, 2, 4, … ns).
    pub granularity: u64,
    /// Slots per level; a power of two, at least 2.
    pub slots: usize,
    /// Number of levels (1 = a single Carousel wheel); level `i` has slot
    /// width `granularity · 2^i`. At most 48.
    pub levels: u8,
    /// Largest memory the slot tables and bitmaps may take, in bytes.
    pub max_memory: usize,
}

impl WheelConfig {
    /// Default memory cap: 64 MiB.
    pub const DEFAULT_MAX_MEMORY: usize = 64 << 20;

    /// A single Carousel wheel of `granularity` ns slots covering at least
    /// `horizon` ns (slots rounded up to a power of two).
    pub fn single(granularity: u64, horizon: Nanos) -> WheelConfig {
        let slots = horizon
            .0
            .div_ceil(granularity.max(1))
            .max(2)
            .checked_next_power_of_two()
            .unwrap_or(1 << 63);
        WheelConfig {
            granularity,
            slots: usize::try_from(slots).unwrap_or(usize::MAX),
            levels: 1,
            max_memory: Self::DEFAULT_MAX_MEMORY,
        }
    }

    /// An MLTW of `slots` slots per level with enough levels that the
    /// coarsest one covers `horizon` ns.
    ///
    /// A flow batches with others only on its own wheel (slot ≈ its
    /// MTU/rate): choose `horizon ≥ slots × (slowest flow's MTU/rate)` so
    /// that wheel exists. A flow whose wheel is missing is filed on the
    /// top level — correct (never early, bursts still ≤ 2 MTU) but with
    /// finer slots, so it wakes the caller more often.
    pub fn mltw(granularity: u64, slots: usize, horizon: Nanos) -> WheelConfig {
        let span0 = (granularity.max(1) as u128) * slots.max(1) as u128;
        let mut levels = 1u8;
        while span0 << (levels - 1) < horizon.0 as u128 && levels < 64 {
            levels += 1;
        }
        WheelConfig {
            granularity,
            slots,
            levels,
            max_memory: Self::DEFAULT_MAX_MEMORY,
        }
    }

    /// Sets the memory cap.
    pub fn max_memory(mut self, bytes: usize) -> WheelConfig {
        self.max_memory = bytes;
        self
    }

    /// Horizon of the coarsest level: `granularity · 2^(levels−1) · slots`
    /// ns (saturating).
    pub fn horizon(&self) -> Nanos {
        let h = (self.granularity as u128) << (self.levels.max(1) - 1);
        let h = h.saturating_mul(self.slots as u128);
        Nanos(u64::try_from(h).unwrap_or(u64::MAX))
    }

    /// Bytes the slot tables and bitmaps take: per level
    /// `slots · 8` (head and tail index) `+ slots / 8 · 64/63` (bitmap).
    pub fn fixed_memory(&self) -> u128 {
        let per_level = self.slots as u128 * 8 + (self.slots as u128 / 8) * 64 / 63 + 8;
        per_level * u128::from(self.levels)
    }

    fn validate(&self, name: &'static str) -> Result<(), ShapeConfigError> {
        if self.granularity == 0 || !self.granularity.is_power_of_two() {
            return Err(ShapeConfigError::new(
                name,
                "granularity",
                format!("{} ns", self.granularity),
                "a power of two of ns: 1, 2, 4, … 2^40",
            ));
        }
        if self.granularity > 1 << 40 {
            return Err(ShapeConfigError::new(
                name,
                "granularity",
                format!("{} ns", self.granularity),
                "1..=2^40 ns",
            ));
        }
        let mem = self.fixed_memory();
        if mem > self.max_memory as u128 {
            return Err(ShapeConfigError::new(
                name,
                "memory",
                format!(
                    "{mem} bytes ({} levels × {} slots of {} ns)",
                    self.levels, self.slots, self.granularity
                ),
                format!("at most max_memory = {} bytes", self.max_memory),
            ));
        }
        if self.slots < 2 || !self.slots.is_power_of_two() || self.slots > 1 << 31 {
            return Err(ShapeConfigError::new(
                name,
                "slots",
                self.slots,
                "a power of two in 2..=2^31",
            ));
        }
        let top = self.granularity.trailing_zeros() + u32::from(self.levels);
        if self.levels == 0
            || usize::from(self.levels) > MAX_LEVELS
            || top + self.slots.trailing_zeros() > 63
        {
            return Err(ShapeConfigError::new(
                name,
                "levels",
                self.levels,
                format!(
                    "1..={} (granularity × 2^(levels−1) × slots must fit in 2^63 ns)",
                    (63 - self.granularity.trailing_zeros() - self.slots.trailing_zeros()).min(48)
                ),
            ));
        }
        Ok(())
    }
}

/// A set of timing wheels with slot widths `g·2^i` (`i = 0..levels`), each
/// of `slots` slots with a hierarchical bitmap of non-empty slots.
///
/// With one level this is Carousel's timing wheel; with many it is
/// FlowBundler's MLTW. See the [module docs](super) for the release policy
/// and the bounds.
#[derive(Clone, Debug)]
pub struct Wheels {
    name: &'static str,
    cfg: WheelConfig,
    /// Head and tail node of every slot's FIFO, all levels in one table:
    /// slot `s` of level `q` is at `q · slots + s` (one bounds check per
    /// filed entry instead of one per level and one per slot).
    slots: Vec<(u32, u32)>,
    /// Non-empty slots, one bitmap per level.
    bits: Vec<HierBitmap>,
    /// `log2(slots)`: the shift from a level to its first slot.
    slot_bits: u32,
    /// Index of the coarsest level.
    top: usize,
    g_shift: u32,
    mask: u64,
    nodes: Vec<Node>,
    /// Free nodes, linked through `next` (LIFO). The entries filed are
    /// the nodes that are not on it: no per-entry counter.
    free: u32,
    /// Entries already due when pushed (head, tail).
    due: (u32, u32),
    /// Released entries not yet handed out, in release order (head,
    /// tail; the tail is stale once the head is NIL).
    ready: (u32, u32),
    /// Entries parked in a coarser wheel, anywhere in the slots. While
    /// there are none, a due slot's whole list joins the ready list at
    /// once; otherwise its entries are looked at one by one.
    parked: u64,
    /// Levels with at least one entry.
    active: u64,
    /// Time of the last release: every slot whose time is `<= last` has
    /// been emptied.
    last: u64,
    /// Cached time of the first non-empty slot (`u64::MAX`: none).
    next: u64,
    /// Entries moved to a coarser wheel because they were beyond their
    /// own wheel's horizon.
    overflowed: u64,
    /// Entries put back into a finer wheel when the coarse slot came.
    cascaded: u64,
}

impl Wheels {
    /// Builds the wheels; the configuration is checked first.
    pub fn new(cfg: WheelConfig) -> Result<Wheels, ShapeConfigError> {
        let name = if cfg.levels == 1 { "wheel" } else { "mltw" };
        cfg.validate(name)?;
        let levels = usize::from(cfg.levels);
        debug_assert!(levels <= MAX_LEVELS);
        Ok(Wheels {
            name,
            cfg,
            slots: vec![(NIL, NIL); cfg.slots * levels],
            bits: (0..levels).map(|_| HierBitmap::new(cfg.slots)).collect(),
            slot_bits: cfg.slots.trailing_zeros(),
            top: levels - 1,
            g_shift: cfg.granularity.trailing_zeros(),
            mask: cfg.slots as u64 - 1,
            nodes: Vec::new(),
            free: NIL,
            due: (NIL, NIL),
            ready: (NIL, NIL),
            parked: 0,
            active: 0,
            last: 0,
            next: u64::MAX,
            overflowed: 0,
            cascaded: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &WheelConfig {
        &self.cfg
    }

    /// Entries moved to a coarser wheel (beyond their own wheel's horizon).
    pub fn overflowed(&self) -> u64 {
        self.overflowed
    }

    /// Entries put back into a finer wheel when their coarse slot came
    /// before their EDT.
    pub fn cascaded(&self) -> u64 {
        self.cascaded
    }

    /// A node for entry `e` of a flow on wheel `level`: the most recently
    /// freed one, or a new one; `None` when `u32` indexes are exhausted
    /// (NIL is reserved, so a NIL index is always past the end of
    /// `nodes`). The fields are written in place: the node is never built
    /// on the stack and copied (the cold `grow` takes the entry and the
    /// level, two and one registers, not a 24-byte node in memory).
    #[inline(always)]
    fn alloc(&mut self, e: Entry, level: u8) -> Option<u32> {
        let i = self.free;
        match self.nodes.get_mut(i as usize) {
            Some(slot) => {
                self.free = slot.next;
                slot.e = e;
                slot.next = NIL;
                slot.level = level;
                slot.parked = false;
                Some(i)
            }
            None => self.grow(e, level),
        }
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, e: Entry, level: u8) -> Option<u32> {
        if self.nodes.len() >= NIL as usize {
            return None;
        }
        self.nodes.push(Node {
            e,
            next: NIL,
            level,
            parked: false,
        });
        Some((self.nodes.len() - 1) as u32)
    }

    #[inline]
    fn release_node(&mut self, i: u32) {
        self.nodes[i as usize].next = self.free;
        self.free = i;
    }

    /// Index in the flat slot table of slot `s` of level `q`.
    #[inline(always)]
    fn slot_index(&self, q: usize, s: usize) -> usize {
        (q << self.slot_bits) | s
    }

    /// Appends node `i` to slot `slot` of level `q`. Only a slot that was
    /// empty changes the level's bitmap, the active levels and the cached
    /// next time: a non-empty slot's time is already `>= next`.
    #[inline(always)]
    fn append(&mut self, q: usize, slot: u64, i: u32) {
        let s = (slot & self.mask) as usize;
        let x = self.slot_index(q, s);
        let (h, t) = self.slots[x];
        if h == NIL {
            self.slots[x] = (i, i);
            self.bits[q].set(s);
            self.active |= 1 << q;
            let time = slot << (self.g_shift + q as u32);
            if time < self.next {
                self.next = time;
            }
        } else {
            self.nodes[t as usize].next = i;
            self.slots[x].1 = i;
        }
    }

    /// Where an entry of EDT `edt` for a flow on wheel `q` goes now, or
    /// `None` if no wheel reaches it. Changes nothing.
    #[inline(always)]
    fn locate(&self, edt: u64, q: usize) -> Option<Place> {
        match self.ceil_place(edt, q) {
            Some((qq, aa)) => Some(Place::Slot(qq, aa)),
            None => self.locate_elsewhere(edt, q),
        }
    }

    /// The level and slot of an entry's ceil slot time, when that slot is
    /// on a wheel and not yet due (the common case); `None` when the entry
    /// is due or beyond its own wheel.
    #[inline(always)]
    fn ceil_place(&self, edt: u64, q: usize) -> Option<(usize, u64)> {
        let s = self.g_shift + q as u32;
        // Ceil slot: the slot's time is the first multiple of g_q >= edt.
        let a = ceil_slot(edt, s);
        if self.is_due(edt, a, s) {
            return None;
        }
        // Merge into the coarsest level whose slot has the same time.
        let k = (a.trailing_zeros() as usize).min(self.top - q);
        let (qq, aa) = (q + k, a >> k);
        // `aa >= cur2`: the slot's time is `>= edt`, and not due.
        let cur2 = (self.last >> (s + k as u32)) + 1;
        (aa.wrapping_sub(cur2) <= self.mask).then_some((qq, aa))
    }

    /// True if ceil slot `a` (of width `2^s` ns) of an entry of EDT `edt`
    /// has been emptied (its time is `<= last`): the entry is due. Only an
    /// `edt <= last` can have such a ceil slot, so the common case (a
    /// future departure) skips the slot comparison.
    #[inline(always)]
    fn is_due(&self, edt: u64, a: u64, s: u32) -> bool {
        edt <= self.last && a < (self.last >> s) + 1
    }

    /// [`Wheels::locate`] for an entry that [`Wheels::ceil_place`] does
    /// not place: due, parked in a coarser wheel, or nowhere.
    #[inline(never)]
    fn locate_elsewhere(&self, edt: u64, q: usize) -> Option<Place> {
        let s = self.g_shift + q as u32;
        if self.is_due(edt, ceil_slot(edt, s), s) {
            return Some(Place::Due);
        }
        match self.park_place(edt, q) {
            (UNREACHED, _) => None,
            (r, b) => Some(Place::Parked(r, b)),
        }
    }

    /// For an entry beyond its own wheel `q`'s horizon: the first coarser
    /// wheel that reaches `edt` and its floor slot there (its time <=
    /// `edt`), or level [`UNREACHED`]; the entry goes back to its own wheel
    /// when that slot comes. Two words, so they come back in registers and
    /// the per-packet `locate` keeps its place out of memory.
    #[cold]
    #[inline(never)]
    fn park_place(&self, edt: u64, q: usize) -> (usize, u64) {
        (q + 1..=self.top)
            .find_map(|r| {
                let sr = self.g_shift + r as u32;
                let b = edt >> sr;
                let cur_r = (self.last >> sr) + 1;
                (b >= cur_r && b - cur_r <= self.mask).then_some((r, b))
            })
            .unwrap_or((UNREACHED, 0))
    }

    /// Files node `i` (allocated, `next = NIL`) at `at`, found by
    /// [`Wheels::locate`] with nothing changed since.
    #[inline(always)]
    fn file(&mut self, i: u32, at: Place) {
        match at {
            Place::Slot(q, a) => self.append(q, a, i),
            Place::Due => {
                match self.nodes.get_mut(self.due.1 as usize) {
                    Some(t) if self.due.0 != NIL => t.next = i,
                    _ => self.due.0 = i,
                }
                self.due.1 = i;
                if self.last < self.next {
                    self.next = self.last;
                }
            }
            Place::Parked(r, b) => self.park(i, r, b),
        }
    }

    #[cold]
    #[inline(never)]
    fn park(&mut self, i: u32, r: usize, b: u64) {
        self.overflowed += 1;
        self.parked += 1;
        if let Some(n) = self.nodes.get_mut(i as usize) {
            n.parked = true;
        }
        self.append(r, b, i);
    }

    /// [`TimeQueue::push`] of an entry that is due or beyond its own
    /// wheel.
    #[inline(never)]
    fn push_elsewhere(&mut self, e: Entry, level: u8) -> Result<(), Entry> {
        let at = self.locate_elsewhere(e.edt, usize::from(level)).ok_or(e)?;
        let node = self.alloc(e, level).ok_or(e)?;
        self.file(node, at);
        Ok(())
    }

    /// First non-empty slot time of level `q` (which must be non-empty).
    fn first_time(&self, q: usize) -> u64 {
        let s = self.g_shift + q as u32;
        let cur = (self.last >> s) + 1;
        let p = (cur & self.mask) as usize;
        let bits = &self.bits[q];
        let a = match bits.next_set(p) {
            Some(x) => cur + (x - p) as u64,
            None => match bits.first_set() {
                Some(x) => cur + (self.cfg.slots - p + x) as u64,
                None => return u64::MAX,
            },
        };
        a << s
    }

    fn recompute_next(&mut self) {
        let mut next = if self.due.0 != NIL {
            self.last
        } else {
            u64::MAX
        };
        let mut m = self.active;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            next = next.min(self.first_time(q));
        }
        self.next = next;
    }

    /// Appends the list `h ..= t` (linked through `next`, `t`'s next
    /// NIL) to the ready list.
    #[inline(always)]
    fn chain(&mut self, h: u32, t: u32) {
        match self.nodes.get_mut(self.ready.1 as usize) {
            Some(n) if self.ready.0 != NIL => n.next = h,
            _ => self.ready.0 = h,
        }
        self.ready.1 = t;
    }

    /// Moves the due entries of the list starting at `h` to the ready list
    /// and the others (parked, not due yet) to `back`, one by one.
    #[cold]
    #[inline(never)]
    fn drain_list(&mut self, mut h: u32, now: u64, back: &mut u32) {
        while h != NIL {
            let Some(n) = self.nodes.get_mut(h as usize) else {
                break;
            };
            let next = n.next;
            if n.parked {
                n.parked = false;
                self.parked -= 1;
            }
            if n.e.edt <= now {
                n.next = NIL;
                self.chain(h, h);
            } else {
                n.next = *back;
                *back = h;
            }
            h = next;
        }
    }

    fn drain_slot(&mut self, q: usize, s: usize, now: u64, back: &mut u32) {
        let x = self.slot_index(q, s);
        let (h, t) = core::mem::replace(&mut self.slots[x], (NIL, NIL));
        self.bits[q].clear(s);
        if self.parked == 0 {
            // Every entry of a slot that is not parked has an EDT at or
            // before the slot's time: the whole list is due.
            self.chain(h, t);
        } else {
            self.drain_list(h, now, back);
        }
        if self.bits[q].none() {
            self.active &= !(1 << q);
        }
    }

    /// Moves every entry whose slot time is `<= now` to the ready list (one
    /// batch); true if the ready list is not empty afterwards. Once per
    /// wake-up: kept out of line so that the per-packet loop around
    /// [`TimeQueue::pop_ready`] stays small.
    #[inline(never)]
    fn release_slots(&mut self, now: u64) -> bool {
        if now < self.next || now < self.last {
            return self.ready.0 != NIL;
        }
        let mut back = NIL;
        let (dh, dt) = core::mem::replace(&mut self.due, (NIL, NIL));
        if dh != NIL {
            // Due when pushed (EDT <= last <= now), never parked.
            self.chain(dh, dt);
        }
        let mut m = self.active;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            self.drain_level(q, now, &mut back);
        }
        self.last = now;
        // Entries parked in a coarser wheel whose slot came before their
        // EDT go back to their own wheel (they are not due yet).
        while back != NIL {
            let i = back;
            back = self.nodes[i as usize].next;
            self.nodes[i as usize].next = NIL;
            self.cascaded += 1;
            let n = self.nodes[i as usize];
            match self.locate(n.e.edt, usize::from(n.level)) {
                Some(Place::Slot(q, a)) => self.insert_in_flow_order(q, a, i),
                Some(at) => self.file(i, at),
                // Cannot happen: it fitted a coarser wheel before, and time
                // only moved towards it. Keep it due rather than lose it.
                None => self.chain(i, i),
            }
        }
        self.recompute_next();
        self.ready.0 != NIL
    }

    /// Files node `i`, an entry back from a coarser wheel, in slot `slot`
    /// of level `q`: before the first entry of its flow there with a later
    /// EDT, else at the end (as [`Wheels::append`] does).
    ///
    /// A flow's entries in a slot stay in EDT order, so that they hand out
    /// its packets (taken in release order, FIFO) each with its own EDT:
    /// entries filed in the slot directly, after this one was parked (its
    /// own wheel did not reach it then), have later EDTs, and entries
    /// parked elsewhere may come back in any order.
    #[cold]
    #[inline(never)]
    fn insert_in_flow_order(&mut self, q: usize, slot: u64, i: u32) {
        let x = self.slot_index(q, (slot & self.mask) as usize);
        let e = self.nodes[i as usize].e;
        let (mut prev, mut at) = (NIL, self.slots[x].0);
        while let Some(n) = self.nodes.get(at as usize) {
            if n.e.flow == e.flow && n.e.edt > e.edt {
                break;
            }
            prev = at;
            at = n.next;
        }
        if at == NIL {
            self.append(q, slot, i);
            return;
        }
        self.nodes[i as usize].next = at;
        match self.nodes.get_mut(prev as usize) {
            Some(p) => p.next = i,
            None => self.slots[x].0 = i,
        }
    }

    /// Drains every slot of level `q` whose time is `<= now`.
    fn drain_level(&mut self, q: usize, now: u64, back: &mut u32) {
        let s = self.g_shift + q as u32;
        let cur = (self.last >> s) + 1;
        let end = now >> s;
        if end < cur {
            return;
        }
        let span = end - cur + 1;
        let n = self.cfg.slots;
        if span >= n as u64 {
            let mut p = self.bits[q].first_set();
            while let Some(x) = p {
                self.drain_slot(q, x, now, back);
                p = self.bits[q].next_set(x + 1);
            }
            return;
        }
        let p0 = (cur & self.mask) as usize;
        let p1 = p0 + span as usize; // exclusive, may exceed n
        let mut from = p0;
        loop {
            let hi = p1.min(n);
            match self.bits[q].next_set(from) {
                Some(x) if x < hi => {
                    self.drain_slot(q, x, now, back);
                    from = x + 1;
                }
                _ => break,
            }
        }
        if p1 > n {
            let mut from = 0;
            while let Some(x) = self.bits[q].next_set(from) {
                if x >= p1 - n {
                    break;
                }
                self.drain_slot(q, x, now, back);
                from = x + 1;
            }
        }
    }

    /// Empties every slot of every level, the due and ready lists and the
    /// node arena (its memory kept), and sets the last release to `now`.
    #[cold]
    #[inline(never)]
    fn clear_at(&mut self, now: u64) {
        let mut m = self.active;
        while m != 0 {
            let q = m.trailing_zeros() as usize;
            m &= m - 1;
            while let Some(x) = self.bits[q].first_set() {
                self.bits[q].clear(x);
                let i = self.slot_index(q, x);
                self.slots[i] = (NIL, NIL);
            }
        }
        self.active = 0;
        self.parked = 0;
        self.due = (NIL, NIL);
        self.ready = (NIL, NIL);
        self.nodes.clear();
        self.free = NIL;
        self.next = u64::MAX;
        self.last = now;
    }

    /// Takes the first ready entry, freeing its node.
    #[inline(always)]
    fn pop_ready_node(&mut self) -> Option<Entry> {
        let i = self.ready.0;
        // NIL (nothing ready) is past the end of `nodes` (see `alloc`).
        let n = self.nodes.get_mut(i as usize)?;
        let e = n.e;
        self.ready.0 = n.next;
        n.next = self.free;
        self.free = i;
        Some(e)
    }
}

impl TimeQueue for Wheels {
    fn name(&self) -> &'static str {
        self.name
    }

    fn level_for(&self, spacing: Nanos) -> u8 {
        let units = spacing.0 >> self.g_shift;
        if units == 0 {
            return 0;
        }
        // find-last-set: the largest level whose slot is <= the spacing.
        let q = 63 - units.leading_zeros();
        q.min(u32::from(self.cfg.levels) - 1) as u8
    }

    fn granularity(&self, level: u8) -> Nanos {
        Nanos(self.cfg.granularity << level.min(self.cfg.levels - 1))
    }

    fn min_spacing(&self) -> Nanos {
        Nanos(self.cfg.granularity)
    }

    fn horizon(&self) -> Nanos {
        self.cfg.horizon()
    }

    type Ticket = WheelTicket;

    /// # Panics
    ///
    /// On a `level` above the top one ([`TimeQueue::level_for`] never
    /// gives one): a caller's contract violation, like an index out of
    /// range. A clamp cost 4–5 instructions per packet on the shaper's
    /// path (measured 2026-11-26), so the level is not clamped.
    #[inline(always)]
    fn reserve(&mut self, e: Entry, level: u8) -> Option<WheelTicket> {
        debug_assert!(
            usize::from(level) <= self.top,
            "level {level} above the top level {}",
            self.top
        );
        let at = self.locate(e.edt, usize::from(level))?;
        let node = self.alloc(e, level)?;
        Some(WheelTicket { node, at })
    }

    #[inline(always)]
    fn commit(&mut self, t: WheelTicket) {
        self.file(t.node, t.at);
    }

    #[cold]
    fn cancel(&mut self, t: WheelTicket) {
        self.release_node(t.node);
    }

    /// [`TimeQueue::reserve`] and [`TimeQueue::commit`] in one step, with
    /// the common case (a slot on a wheel, not due) on a path of its own,
    /// so its level and slot go straight from the arithmetic to the slot.
    #[inline(always)]
    fn push(&mut self, e: Entry, level: u8) -> Result<(), Entry> {
        debug_assert!(
            usize::from(level) <= self.top,
            "level {level} above the top level {}",
            self.top
        );
        let Some((q, slot)) = self.ceil_place(e.edt, usize::from(level)) else {
            return self.push_elsewhere(e, level);
        };
        let node = self.alloc(e, level).ok_or(e)?;
        self.append(q, slot, node);
        Ok(())
    }

    fn release_to(&mut self, now: Nanos, out: &mut Vec<Entry>) -> usize {
        self.release_slots(now.0);
        let before = out.len();
        while let Some(e) = self.pop_ready_node() {
            out.push(e);
        }
        out.len() - before
    }

    #[inline]
    fn release_ready(&mut self, now: Nanos) -> bool {
        self.release_slots(now.0)
    }

    #[inline(always)]
    fn pop_ready(&mut self) -> Option<Entry> {
        self.pop_ready_node()
    }

    #[inline(always)]
    fn has_ready(&self) -> bool {
        self.ready.0 != NIL
    }

    fn next_due(&self) -> Option<Nanos> {
        (self.next != u64::MAX).then_some(Nanos(self.next))
    }

    /// The last release moves to `now` when no slot is due by then: the
    /// slots whose time is `<= now` are all empty (their times are before
    /// `next`), and every filed entry's slot is still within a wheel of
    /// `now` (it is after `now`, and no further than before).
    #[cold]
    fn catch_up(&mut self, now: Nanos) {
        if now.0 > self.last && now.0 < self.next {
            self.last = now.0;
        }
    }

    fn reset(&mut self, now: Nanos) {
        self.clear_at(now.0);
    }

    /// Counted by walking the free list (`O(nodes)`, at most the peak
    /// number of entries): a diagnostic, kept off the per-packet path.
    fn len(&self) -> usize {
        let mut free = 0usize;
        let mut i = self.free;
        // At most one step per node: a free list is never longer.
        while free < self.nodes.len() {
            let Some(n) = self.nodes.get(i as usize) else {
                break;
            };
            free += 1;
            i = n.next;
        }
        self.nodes.len() - free
    }

    fn memory_bytes(&self) -> usize {
        self.slots.capacity() * 8
            + self
                .bits
                .iter()
                .map(HierBitmap::memory_bytes)
                .sum::<usize>()
            + self.bits.capacity() * core::mem::size_of::<HierBitmap>()
            + self.nodes.capacity() * core::mem::size_of::<Node>()
    }
}

#[cfg(test)]
mod tests {
    use super::{WheelConfig, Wheels, ceil_slot};
    use crate::shape::{Entry, TimeQueue};
    use crate::units::Nanos;

    /// A caller's level above the top one is a contract violation that
    /// panics (it must not file the entry somewhere wrong instead).
    #[test]
    // The debug build names the contract; a release build panics on the
    // index instead (debug_assert! is off there).
    #[cfg_attr(debug_assertions, should_panic(expected = "above the top level"))]
    #[cfg_attr(not(debug_assertions), should_panic)]
    fn push_refuses_a_level_above_the_top_one_by_panicking() {
        let mut w = Wheels::new(WheelConfig::mltw(1, 8, Nanos(64))).expect("valid config");
        let top = w.config().levels - 1;
        let e = Entry {
            edt: 10,
            flow: 0,
            generation: 0,
        };
        let _ = w.push(e, top + 1);
    }

    /// `push`'s own path (the shaper's) and `reserve` + `commit` (the
    /// trait's general filing, with `cancel`) file alike: the same entries
    /// refused and the same releases, entry for entry, on seeded random
    /// entries across every level, the due case and the horizon.
    #[test]
    fn push_files_as_reserve_and_commit_do() {
        let cfg = WheelConfig::mltw(64, 16, Nanos(1 << 20));
        let mut by_push = Wheels::new(cfg).expect("valid config");
        let mut by_ticket = Wheels::new(cfg).expect("valid config");
        let top = by_push.config().levels - 1;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut now = 0u64;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let level = (x % u64::from(top + 1)) as u8;
            let edt = now.saturating_sub(100) + (x >> 20) % (1 << 21);
            let e = Entry {
                edt,
                flow: i,
                generation: 0,
            };
            let pushed = by_push.push(e, level);
            let reserved = by_ticket.reserve(e, level);
            assert_eq!(pushed.is_ok(), reserved.is_some(), "entry {i}: {e:?}");
            if let Some(t) = reserved {
                if i % 97 == 0 {
                    by_ticket.cancel(t);
                    let _ = by_ticket.reserve(e, level).map(|t| by_ticket.commit(t));
                } else {
                    by_ticket.commit(t);
                }
            }
            if i % 50 == 49 {
                now += 3_000;
                by_push.release_to(Nanos(now), &mut a);
                by_ticket.release_to(Nanos(now), &mut b);
                assert_eq!(a, b, "releases up to {now} ns");
            }
        }
        assert!(a.len() > 1_000, "entries released: {}", a.len());
    }

    /// An entry parked in a coarser wheel (beyond its own when filed) goes
    /// back into its slot ahead of a later entry of its flow filed there
    /// directly once the last release had moved on: a flow's entries in
    /// a slot stay in EDT order.
    #[test]
    fn a_parked_entry_goes_back_before_its_flows_later_ones() {
        // 1 ns slots, 4 per level, 4 levels.
        let mut w = Wheels::new(WheelConfig::mltw(1, 4, Nanos(32))).expect("valid config");
        let e = |edt, flow| Entry {
            edt,
            flow,
            generation: 0,
        };
        // Level 1 (2 ns slots) reaches slot 4 (8 ns) from 0: EDT 9 (slot
        // 10 ns) is parked in level 2 at 8 ns.
        w.push(e(9, 1), 1).expect("parked");
        assert_eq!(w.overflowed(), 1);
        w.push(e(4, 2), 0).expect("filed");
        let mut out = Vec::new();
        w.release_to(Nanos(4), &mut out);
        assert_eq!(out, [e(4, 2)]);
        // From 4 ns, level 1 reaches 10 ns: EDT 10 goes there directly.
        w.push(e(10, 1), 1).expect("filed");
        out.clear();
        w.release_to(Nanos(8), &mut out);
        assert!(out.is_empty());
        assert_eq!(w.cascaded(), 1);
        w.release_to(Nanos(10), &mut out);
        assert_eq!(out, [e(9, 1), e(10, 1)]);
    }

    /// The add-and-shift ceil and its cold path agree with a 128-bit
    /// division at the ends of the range, where the add overflows.
    #[test]
    fn ceil_slot_is_exact_up_to_u64_max() {
        for s in [0u32, 1, 5, 10, 31, 62, 63] {
            let g = 1u128 << s;
            for edt in [
                0u64,
                1,
                (1 << s) - 1,
                1 << s,
                (1 << s) + 1,
                12_345_678_901,
                u64::MAX - (1 << s),
                u64::MAX - (1 << s) + 1,
                u64::MAX - 1,
                u64::MAX,
            ] {
                let want = u64::try_from(u128::from(edt).div_ceil(g)).expect("fits");
                assert_eq!(ceil_slot(edt, s), want, "edt {edt}, s {s}");
            }
        }
    }
}
