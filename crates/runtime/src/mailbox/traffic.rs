//! A model of the cross-core cache-line traffic of the mailbox's layouts
//! (and of IFFQ's and rtrb's, for reference), where no hardware counters
//! are available.
//!
//! The protocol's memory accesses are replayed in a fixed order on two
//! model cores, each with a cache that holds every line it touched until
//! the other core writes it (MESI without capacity limits). A *move* is
//! an access that needs the other core: a read or a write of a line the
//! core does not hold while the other one does, or a write of a line both
//! hold (the other copy is invalidated). Cold misses (first touch) are not
//! counted, nor is anything a real core does besides (prefetchers, store
//! buffers coalescing writes): the figures compare layouts, they do not
//! predict a rate. Addresses are those of a real ring for the mailbox; for
//! IFFQ and rtrb, slots of 8 bytes from 0 (rtrb's two indices on lines of
//! their own). The regimes: the consumer right behind (push k, pop k),
//! trailing by `d` items (push 1, pop 1 with `d` queued), and the queue
//! kept full.
//!
//! `cargo test -p pktsched-runtime --lib traffic -- --nocapture` prints the
//! table; the tests assert the relations the layout is for.

use std::collections::HashMap;

use super::Mailbox;

/// One access of the replayed protocol.
#[derive(Clone, Copy)]
enum Access {
    Read(usize),
    Write(usize),
}

/// The two model caches and the moves counted so far.
#[derive(Default)]
struct Caches {
    /// Per 64-byte line: which of the two cores hold it.
    holders: HashMap<usize, [bool; 2]>,
    moves: [u64; 2],
}

impl Caches {
    fn access(&mut self, core: usize, access: Access) {
        let (addr, write) = match access {
            Access::Read(a) => (a, false),
            Access::Write(a) => (a, true),
        };
        let other = 1 - core;
        let held = self.holders.entry(addr / 64).or_default();
        let needs_other = held[other] && (write || !held[core]);
        if needs_other {
            self.moves[core] += 1;
        }
        if write {
            held[other] = false;
        }
        held[core] = true;
    }
}

/// A queue model: the accesses of one push and of one pop.
trait Model {
    /// Items the queue holds when it runs full.
    fn capacity(&self) -> usize;
    /// Items between two look-aheads / releases: the chunk the "full"
    /// regime moves at a time.
    fn line(&self) -> usize;
    fn push(&self, item: usize, out: &mut Vec<Access>);
    fn pop(&self, item: usize, out: &mut Vec<Access>);
}

/// The mailbox with `L`-slot lines of `H`-slot groups, single pops.
struct Pspat {
    /// `(stamp, value)` addresses of every slot, in ring order.
    slots: Vec<(usize, usize)>,
    line: usize,
    group: usize,
    /// The consumer prefetches the line after the next on each release
    /// (`Consumer::set_prefetch`; a prefetch moves a line as a read does).
    prefetch: bool,
}

impl Pspat {
    fn new<const L: usize, const H: usize>(capacity: usize) -> Self {
        let (tx, _rx) = Mailbox::with_layout::<u64, L, H>(capacity);
        let ring = &tx.ring;
        let slots = ring.groups[ring.first..ring.end]
            .iter()
            .flat_map(|g| {
                g.stamps
                    .iter()
                    .zip(g.values.iter())
                    .map(|(s, v)| (std::ptr::from_ref(s).addr(), std::ptr::from_ref(v).addr()))
            })
            .collect();
        Self {
            slots,
            line: L,
            group: H,
            prefetch: false,
        }
    }

    fn prefetching(self) -> Self {
        Self {
            prefetch: true,
            ..self
        }
    }
}

impl Model for Pspat {
    fn capacity(&self) -> usize {
        self.slots.len() - self.line
    }
    fn line(&self) -> usize {
        self.line
    }
    fn push(&self, item: usize, out: &mut Vec<Access>) {
        let n = self.slots.len();
        let i = item % n;
        if i.is_multiple_of(self.line) {
            // Claiming this line: look at the first stamp of the next one.
            out.push(Access::Read(self.slots[(i + self.line) % n].0));
        }
        let (stamp, value) = self.slots[i];
        out.push(Access::Write(value));
        out.push(Access::Write(stamp));
    }
    fn pop(&self, item: usize, out: &mut Vec<Access>) {
        let n = self.slots.len();
        let i = item % n;
        let (stamp, value) = self.slots[i];
        out.push(Access::Read(stamp));
        out.push(Access::Read(value));
        if i % self.line == self.line - 1 {
            // Release: the first stamp of the line.
            out.push(Access::Write(self.slots[i + 1 - self.line].0));
            if self.prefetch {
                let ahead = i + 1 + self.line;
                for slot in (ahead..ahead + self.line).step_by(self.group) {
                    out.push(Access::Read(self.slots[slot % n].0));
                }
            }
        }
    }
}

/// IFFQ (spscq's `iffq_insert` / `iffq_extract` / `iffq_clear`): 8-byte
/// slots, `entries` of them, `line` per look-ahead; the consumer zeroes
/// the slots of a line one line behind its read index.
struct Iffq {
    entries: usize,
    line: usize,
}

impl Model for Iffq {
    fn capacity(&self) -> usize {
        self.entries - 2 * self.line
    }
    fn line(&self) -> usize {
        self.line
    }
    fn push(&self, item: usize, out: &mut Vec<Access>) {
        if item.is_multiple_of(self.line) {
            out.push(Access::Read(((item + self.line) % self.entries) * 8));
        }
        out.push(Access::Write((item % self.entries) * 8));
    }
    fn pop(&self, item: usize, out: &mut Vec<Access>) {
        out.push(Access::Read((item % self.entries) * 8));
        let read = item + 1;
        if read.is_multiple_of(self.line) && read >= 2 * self.line {
            for slot in read - 2 * self.line..read - self.line {
                out.push(Access::Write((slot % self.entries) * 8));
            }
        }
    }
}

/// rtrb 0.3 (`Producer::push` / `Consumer::pop`): 8-byte slots, `entries`
/// of them, and two shared indices, each on its own line, each stored on
/// every call by its owner. Each side keeps a cached copy of the other's
/// index and loads the shared one only when its copy says full (producer)
/// or empty (consumer). The cached copies are replayed exactly, so the
/// model follows the same decisions rtrb takes.
struct Rtrb {
    entries: usize,
    /// The regime's chunk (rtrb has no line of its own): a hardware line
    /// of slots.
    chunk: usize,
    /// (producer's cached head, consumer's cached tail), in items.
    cached: std::cell::Cell<(usize, usize)>,
    /// (head, tail) as last stored, in items.
    shared: std::cell::Cell<(usize, usize)>,
}

/// Addresses of rtrb's two index lines, after the slots.
const RTRB_HEAD: usize = 1 << 30;
const RTRB_TAIL: usize = RTRB_HEAD + 128;

impl Rtrb {
    fn new(entries: usize) -> Self {
        Self {
            entries,
            chunk: 8,
            cached: std::cell::Cell::new((0, 0)),
            shared: std::cell::Cell::new((0, 0)),
        }
    }
}

impl Model for Rtrb {
    fn capacity(&self) -> usize {
        self.entries
    }
    fn line(&self) -> usize {
        self.chunk
    }
    fn push(&self, item: usize, out: &mut Vec<Access>) {
        let (mut head, tail) = self.cached.get();
        if item - head == self.entries {
            out.push(Access::Read(RTRB_HEAD));
            head = self.shared.get().0;
            self.cached.set((head, tail));
        }
        out.push(Access::Write((item % self.entries) * 8));
        out.push(Access::Write(RTRB_TAIL));
        let (h, _) = self.shared.get();
        self.shared.set((h, item + 1));
    }
    fn pop(&self, item: usize, out: &mut Vec<Access>) {
        let (head, mut tail) = self.cached.get();
        if item == tail {
            out.push(Access::Read(RTRB_TAIL));
            tail = self.shared.get().1;
            self.cached.set((head, tail));
        }
        out.push(Access::Read((item % self.entries) * 8));
        out.push(Access::Write(RTRB_HEAD));
        let (_, t) = self.shared.get();
        self.shared.set((item + 1, t));
    }
}

/// How the two threads interleave.
#[derive(Clone, Copy, Debug)]
enum Regime {
    /// Push `k` items, pop them, repeat: the consumer right behind.
    Behind(usize),
    /// The consumer `d` items behind: push 1, pop 1 with `d` queued.
    Lag(usize),
    /// The queue kept full: pop a line's worth, push as many.
    Full,
}

/// Moves per item (producer, consumer) over `items` items after a warm-up
/// of two passes.
fn moves_per_item(model: &dyn Model, regime: Regime, items: usize) -> (f64, f64) {
    let mut caches = Caches::default();
    let mut accesses = Vec::new();
    let (mut pushed, mut popped) = (0, 0);
    let prefill = match regime {
        Regime::Behind(_) => 0,
        Regime::Lag(d) => d.min(model.capacity() - 1),
        Regime::Full => model.capacity(),
    };
    {
        while pushed < prefill {
            model.push(pushed, &mut accesses);
            pushed += 1;
        }
    }
    let warm = 2 * (model.capacity() + model.line());
    let mut counted_from = None;
    while popped < warm + items {
        if counted_from.is_none() && popped >= warm {
            counted_from = Some(caches.moves);
        }
        let k = match regime {
            Regime::Behind(k) => k,
            Regime::Lag(_) => 1,
            Regime::Full => model.line(),
        };
        // Kept full, the consumer makes room first.
        let order = match regime {
            Regime::Behind(_) | Regime::Lag(_) => [(0, true), (1, false)],
            Regime::Full => [(1, false), (0, true)],
        };
        for (core, step) in order {
            for _ in 0..k {
                accesses.clear();
                if step {
                    model.push(pushed, &mut accesses);
                    pushed += 1;
                } else {
                    model.pop(popped, &mut accesses);
                    popped += 1;
                }
                for &a in &accesses {
                    caches.access(core, a);
                }
            }
        }
    }
    let start = counted_from.unwrap_or_default();
    let n = (popped - warm) as f64;
    (
        (caches.moves[0] - start[0]) as f64 / n,
        (caches.moves[1] - start[1]) as f64 / n,
    )
}

/// Fresh models (rtrb's carries its cached indices from call to call).
fn models() -> Vec<(&'static str, Box<dyn Model>)> {
    vec![
        (
            "mailbox 28/7, prefetch",
            Box::new(Pspat::new::<28, 7>(1024).prefetching()),
        ),
        (
            "mailbox 28/7 (default, no prefetch)",
            Box::new(Pspat::new::<28, 7>(1024)),
        ),
        ("mailbox 7/7", Box::new(Pspat::new::<7, 7>(1024))),
        (
            "mailbox 14/14 (one group)",
            Box::new(Pspat::new::<14, 14>(1024)),
        ),
        (
            "mailbox 14/7",
            Box::new(Pspat::new::<14, 7>(1024).prefetching()),
        ),
        (
            "iffq, 32-entry lines",
            Box::new(Iffq {
                entries: 1024,
                line: 32,
            }),
        ),
        ("rtrb", Box::new(Rtrb::new(1024))),
        (
            "iffq, 8-entry lines",
            Box::new(Iffq {
                entries: 1024,
                line: 8,
            }),
        ),
    ]
}

fn table() -> Vec<(&'static str, Regime, f64, f64)> {
    let mut rows = Vec::new();
    for regime in [
        Regime::Behind(1),
        Regime::Behind(4),
        Regime::Lag(64),
        Regime::Lag(512),
        Regime::Full,
    ] {
        for (name, model) in &models() {
            let (p, c) = moves_per_item(model.as_ref(), regime, 100_000);
            rows.push((*name, regime, p, c));
        }
    }
    rows
}

#[test]
fn line_moves_per_item_by_layout() {
    let rows = table();
    println!(
        "{:<28} {:<10} {:>9} {:>9} {:>9}",
        "queue", "regime", "producer", "consumer", "total"
    );
    for (name, regime, p, c) in &rows {
        println!(
            "{name:<28} {:<10} {p:>9.3} {c:>9.3} {:>9.3}",
            format!("{regime:?}"),
            p + c
        );
    }
    let total = |name: &str, want: &str| {
        rows.iter()
            .find(|r| r.0 == name && format!("{:?}", r.1) == want)
            .map(|r| r.2 + r.3)
            .unwrap_or(f64::NAN)
    };
    // Right behind the producer, one hardware line per item each way with
    // groups; the one-group line moves the stamp's and the value's line
    // for slots 6..13.
    let (grouped, single) = (
        total("mailbox 28/7 (default, no prefetch)", "Behind(1)"),
        total("mailbox 14/14 (one group)", "Behind(1)"),
    );
    assert!(
        grouped < 2.2,
        "default layout, consumer right behind: {grouped}"
    );
    assert!(
        single > grouped + 0.5,
        "one group {single} vs groups {grouped}"
    );
    // Kept full, every layout moves each hardware line about once each way
    // per pass: a 64-byte group of 7 items costs more per item than a line
    // of 8 bare pointers, but not by more than the density difference plus
    // the look-ahead and release.
    let full = total("mailbox 28/7 (default, no prefetch)", "Full");
    assert!(full < 0.5, "default layout, kept full: {full}");
    // rtrb stores its index on every call: right behind, the index lines
    // move with every item on top of the slot's line. Trailing by a line or
    // more, its cached copies spare it the index lines and its slots are
    // 8 to a hardware line: it moves fewer lines than any mailbox layout
    // (no look-ahead, no release, no stamps).
    let rtrb_behind = total("rtrb", "Behind(1)");
    assert!(
        rtrb_behind > 1.5 * grouped,
        "rtrb {rtrb_behind} vs mailbox {grouped}, right behind"
    );
    for layout in ["mailbox 28/7 (default, no prefetch)", "mailbox 14/7"] {
        let (m, r) = (total(layout, "Lag(64)"), total("rtrb", "Lag(64)"));
        assert!(r < m, "{layout} {m} vs rtrb {r}, 64 behind");
    }
    // The consumer's prefetch reads lines it reads anyway a line later:
    // it adds no move in any regime of the model.
    for regime in ["Behind(1)", "Behind(4)", "Lag(64)", "Full"] {
        let (with, without) = (
            total("mailbox 28/7, prefetch", regime),
            total("mailbox 28/7 (default, no prefetch)", regime),
        );
        assert!(with <= without + 0.01, "{regime}: {with} vs {without}");
    }
}
