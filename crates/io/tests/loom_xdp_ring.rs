//! Loom model of the AF_XDP ring protocol (`src/xdp/ring.rs`): the very
//! `Producer` / `Consumer` functions the device uses, run against a
//! simulated kernel that follows the same protocol. Descriptors and UMEM
//! frames are loom cells, so loom reports any read of a slot or frame not
//! ordered after its write (and any overwrite not ordered after its last
//! read). Run with `ci/loom.sh`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::AtomicU32;
use loom::thread;

use pktsched_io::xdp::ring::{Consumer, Producer};

// The runtime's loom tests' child-process runner: one helper for every
// broken model in the workspace.
#[path = "../../runtime/tests/loom_support/mod.rs"]
mod loom_support;

/// A ring: the two shared indices and `size` descriptor slots.
struct Ring {
    prod: AtomicU32,
    cons: AtomicU32,
    slots: Vec<UnsafeCell<u64>>,
}

impl Ring {
    fn new(size: u32) -> Ring {
        Ring {
            prod: AtomicU32::new(0),
            cons: AtomicU32::new(0),
            slots: (0..size).map(|_| UnsafeCell::new(0)).collect(),
        }
    }
}

/// Writes `v` into cell `c` (loom checks the access is ordered).
fn put(c: &UnsafeCell<u64>, v: u64) {
    // SAFETY: plain u64 write through loom's cell; loom verifies that no
    // other access races with it.
    c.with_mut(|p| unsafe { *p = v });
}

/// Reads cell `c`.
fn get(c: &UnsafeCell<u64>) -> u64 {
    // SAFETY: plain u64 read through loom's cell; loom verifies it.
    c.with(|p| unsafe { *p })
}

/// Which acquire or release of the ring protocol a model relaxes (the
/// broken variants loom must reject).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Broken {
    /// The real protocol.
    Nothing,
    /// The producer publishes without release (`submit_relaxed`).
    Submit,
    /// The consumer frees slots without release (`release_relaxed`).
    Release,
    /// The producer reads the consumer's index without acquire
    /// (`free_relaxed`).
    Free,
    /// The consumer reads the producer's index without acquire
    /// (`available_relaxed`).
    Available,
}

/// One ring, a producer and a consumer: `items` values through `size`
/// slots (more items than slots, so slots are reused). `broken` relaxes
/// one side's acquire or release.
fn one_ring(items: u64, size: u32, broken: Broken) {
    loom::model(move || {
        let ring = Arc::new(Ring::new(size));
        let r2 = ring.clone();
        let consumer = thread::spawn(move || {
            let mut c = Consumer::new(size);
            let mut next = 0;
            while next < items {
                let n = if broken == Broken::Available {
                    c.available_relaxed(&r2.prod, 2)
                } else {
                    c.available(&r2.prod, 2)
                };
                if n == 0 {
                    thread::yield_now();
                    continue;
                }
                for i in 0..n {
                    assert_eq!(get(&r2.slots[c.slot(i)]), next);
                    next += 1;
                }
                if broken == Broken::Release {
                    c.release_relaxed(&r2.cons, n);
                } else {
                    c.release(&r2.cons, n);
                }
            }
        });
        let mut p = Producer::new(size);
        let mut v = 0;
        while v < items {
            let free = if broken == Broken::Free {
                p.free_relaxed(&ring.cons, 1)
            } else {
                p.free(&ring.cons, 1)
            };
            if free == 0 {
                thread::yield_now();
                continue;
            }
            put(&ring.slots[p.slot(0)], v);
            if broken == Broken::Submit {
                p.submit_relaxed(&ring.prod, 1);
            } else {
                p.submit(&ring.prod, 1);
            }
            v += 1;
        }
        consumer.join().expect("consumer thread");
    });
}

#[test]
fn one_ring_delivers_every_entry_in_order_across_the_wrap() {
    one_ring(3, 2, Broken::Nothing);
}

/// The receive cycle: user space stocks the fill ring with `frames`
/// UMEM frames; the kernel takes a frame from the fill ring, writes a
/// packet into it and posts it on the RX ring; user space reads the
/// packet and gives the frame back to the fill ring. `packets` > `frames`,
/// so frames are reused: the kernel's write of a reused frame must be
/// ordered after user space's read of it (through the fill ring).
#[test]
fn frames_cycle_through_fill_and_rx_without_a_race() {
    const FRAMES: u32 = 2;
    const PACKETS: u64 = 3;
    loom::model(|| {
        let fill = Arc::new(Ring::new(FRAMES));
        let rx = Arc::new(Ring::new(FRAMES));
        let umem: Arc<Vec<UnsafeCell<u64>>> =
            Arc::new((0..FRAMES).map(|_| UnsafeCell::new(u64::MAX)).collect());
        let (kfill, krx, kumem) = (fill.clone(), rx.clone(), umem.clone());
        let kernel = thread::spawn(move || {
            let (mut f, mut r) = (Consumer::new(FRAMES), Producer::new(FRAMES));
            let mut seq = 0;
            while seq < PACKETS {
                if f.available(&kfill.prod, 1) == 0 || r.free(&krx.cons, 1) == 0 {
                    thread::yield_now();
                    continue;
                }
                let frame = get(&kfill.slots[f.slot(0)]);
                f.release(&kfill.cons, 1);
                put(&kumem[frame as usize], seq);
                put(&krx.slots[r.slot(0)], frame);
                r.submit(&krx.prod, 1);
                seq += 1;
            }
        });
        let (mut f, mut r) = (Producer::new(FRAMES), Consumer::new(FRAMES));
        for i in 0..FRAMES {
            put(&fill.slots[f.slot(i)], u64::from(i));
        }
        f.submit(&fill.prod, FRAMES);
        let mut seq = 0;
        while seq < PACKETS {
            let n = r.available(&rx.prod, 1);
            if n == 0 {
                thread::yield_now();
                continue;
            }
            let frame = get(&rx.slots[r.slot(0)]);
            assert_eq!(
                get(&umem[frame as usize]),
                seq,
                "packet {seq} in frame {frame}"
            );
            r.release(&rx.cons, 1);
            assert!(
                f.free(&fill.cons, 1) >= 1,
                "the fill ring has room for every frame"
            );
            put(&fill.slots[f.slot(0)], frame);
            f.submit(&fill.prod, 1);
            seq += 1;
        }
        kernel.join().expect("kernel thread");
    });
}

/// A class group: one fill ring shared by two RX rings (one per class),
/// each smaller than the pool of frames, as `xdp::open_class_group` sets
/// them up. The kernel takes a frame from the fill ring for packet `seq`
/// and posts it on class `seq % 2`'s ring (waiting while that ring is
/// full); user space reads both rings from one thread and returns each
/// frame to the one fill ring, so a frame freed by one class is reused
/// for the other: that reuse must be ordered after the read through the
/// fill ring, and the fill ring must always have room.
#[test]
fn one_fill_ring_feeds_two_class_rings_without_a_race() {
    const FRAMES: u32 = 2;
    const RING: u32 = 1;
    const PACKETS: u64 = 3;
    loom::model(|| {
        let fill = Arc::new(Ring::new(FRAMES));
        let rxs = Arc::new([Ring::new(RING), Ring::new(RING)]);
        let umem: Arc<Vec<UnsafeCell<u64>>> =
            Arc::new((0..FRAMES).map(|_| UnsafeCell::new(u64::MAX)).collect());
        let (kfill, krxs, kumem) = (fill.clone(), rxs.clone(), umem.clone());
        let kernel = thread::spawn(move || {
            let mut f = Consumer::new(FRAMES);
            let mut r = [Producer::new(RING), Producer::new(RING)];
            let mut seq = 0;
            while seq < PACKETS {
                let class = (seq % 2) as usize;
                if f.available(&kfill.prod, 1) == 0 || r[class].free(&krxs[class].cons, 1) == 0 {
                    thread::yield_now();
                    continue;
                }
                let frame = get(&kfill.slots[f.slot(0)]);
                f.release(&kfill.cons, 1);
                put(&kumem[frame as usize], seq);
                put(&krxs[class].slots[r[class].slot(0)], frame);
                r[class].submit(&krxs[class].prod, 1);
                seq += 1;
            }
        });
        let mut f = Producer::new(FRAMES);
        let mut r = [Consumer::new(RING), Consumer::new(RING)];
        for i in 0..FRAMES {
            put(&fill.slots[f.slot(i)], u64::from(i));
        }
        f.submit(&fill.prod, FRAMES);
        let (mut got, mut next) = (0, [0u64, 1u64]);
        while got < PACKETS {
            let mut any = false;
            for class in 0..2 {
                if r[class].available(&rxs[class].prod, 1) == 0 {
                    continue;
                }
                let frame = get(&rxs[class].slots[r[class].slot(0)]);
                assert_eq!(get(&umem[frame as usize]), next[class], "class {class}");
                next[class] += 2;
                r[class].release(&rxs[class].cons, 1);
                assert!(
                    f.free(&fill.cons, 1) >= 1,
                    "the fill ring has room for every frame"
                );
                put(&fill.slots[f.slot(0)], frame);
                f.submit(&fill.prod, 1);
                got += 1;
                any = true;
            }
            if !any {
                thread::yield_now();
            }
        }
        kernel.join().expect("kernel thread");
    });
}

/// Publishing without release lets the consumer read a slot before the
/// producer's write: loom must report it. Loom's failure can abort the
/// process while unwinding parked threads, so the broken model runs in a
/// child process (the ignored test below) and this test checks it failed
/// with loom's causality report.
#[test]
fn publishing_without_release_is_caught() {
    loom_support::expect_broken_model_fails(
        "broken_relaxed_publish_child",
        "Causality violation",
        "release on publish",
        "with loom's causality report",
    );
}

/// The broken model itself; run only by `publishing_without_release_is_caught`.
#[test]
#[ignore = "run in a child process by publishing_without_release_is_caught"]
fn broken_relaxed_publish_child() {
    one_ring(2, 2, Broken::Submit);
}

/// Freeing slots without release lets the producer overwrite a slot the
/// consumer is still reading (its read not ordered before the write): loom
/// must report it. Three items through two slots, so a slot is reused.
#[test]
fn freeing_without_release_is_caught() {
    loom_support::expect_broken_model_fails(
        "broken_relaxed_release_child",
        "Causality violation",
        "release on free (consumer's release)",
        "with loom's causality report",
    );
}

/// The broken model itself; run only by `freeing_without_release_is_caught`.
#[test]
#[ignore = "run in a child process by freeing_without_release_is_caught"]
fn broken_relaxed_release_child() {
    one_ring(3, 2, Broken::Release);
}

/// The producer reading the consumer's index without acquire may overwrite
/// a freed slot before the consumer's read of it is ordered: loom must
/// report it.
#[test]
fn reading_free_slots_without_acquire_is_caught() {
    loom_support::expect_broken_model_fails(
        "broken_relaxed_free_child",
        "Causality violation",
        "acquire in free (producer's read of the consumer's index)",
        "with loom's causality report",
    );
}

/// The broken model itself; run only by
/// `reading_free_slots_without_acquire_is_caught`.
#[test]
#[ignore = "run in a child process by reading_free_slots_without_acquire_is_caught"]
fn broken_relaxed_free_child() {
    one_ring(3, 2, Broken::Free);
}

/// The consumer reading the producer's index without acquire may read a
/// slot before the producer's write of it: loom must report it.
#[test]
fn reading_available_entries_without_acquire_is_caught() {
    loom_support::expect_broken_model_fails(
        "broken_relaxed_available_child",
        "Causality violation",
        "acquire in available (consumer's read of the producer's index)",
        "with loom's causality report",
    );
}

/// The broken model itself; run only by
/// `reading_available_entries_without_acquire_is_caught`.
#[test]
#[ignore = "run in a child process by reading_available_entries_without_acquire_is_caught"]
fn broken_relaxed_available_child() {
    one_ring(2, 2, Broken::Available);
}
