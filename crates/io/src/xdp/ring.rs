//! The index protocol of an AF_XDP ring, as small functions over the two
//! shared indices, generic so the loom model (`tests/loom_xdp_ring.rs`)
//! runs the very same code against a simulated kernel.
//!
//! A ring is `size` (a power of two) descriptor slots and two free-running
//! `u32` indices: the producer's and the consumer's; slot = index & (size
//! − 1). Each side keeps cached copies and touches the shared indices
//! only when the cache runs out:
//!
//! * the producer writes descriptors into free slots, then publishes them
//!   with a **release** store of its index; it learns of freed slots with
//!   an **acquire** load of the consumer's index (so the consumer's reads
//!   of a slot happen before the producer overwrites it);
//! * the consumer learns of new descriptors with an **acquire** load of
//!   the producer's index (so the producer's writes are visible), reads
//!   them, then frees their slots with a **release** store of its index.
//!
//! The kernel's side does the same (`smp_load_acquire` /
//! `smp_store_release` in `net/xdp/xsk_queue.h`).

use std::sync::atomic::Ordering;

/// A shared ring index (the kernel's `u32` in the mapping, or loom's
/// atomic in the model).
pub trait RingIndex {
    /// Reads the index.
    fn load(&self, order: Ordering) -> u32;
    /// Writes the index.
    fn store(&self, value: u32, order: Ordering);
}

impl RingIndex for std::sync::atomic::AtomicU32 {
    #[inline]
    fn load(&self, order: Ordering) -> u32 {
        std::sync::atomic::AtomicU32::load(self, order)
    }
    #[inline]
    fn store(&self, value: u32, order: Ordering) {
        std::sync::atomic::AtomicU32::store(self, value, order)
    }
}

#[cfg(loom)]
impl RingIndex for loom::sync::atomic::AtomicU32 {
    fn load(&self, order: Ordering) -> u32 {
        loom::sync::atomic::AtomicU32::load(self, order)
    }
    fn store(&self, value: u32, order: Ordering) {
        loom::sync::atomic::AtomicU32::store(self, value, order)
    }
}

/// The producing side of a ring (ours: fill and TX; the kernel's: RX and
/// completion).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Producer {
    mask: u32,
    /// Our index: slots below it are published or being written.
    prod: u32,
    /// The consumer's index as last read.
    cons: u32,
}

impl Producer {
    /// A producer of a fresh ring of `size` slots (a power of two).
    pub fn new(size: u32) -> Producer {
        debug_assert!(size.is_power_of_two());
        Producer {
            mask: size - 1,
            prod: 0,
            cons: 0,
        }
    }

    fn known_free(&self) -> u32 {
        (self.mask + 1) - self.prod.wrapping_sub(self.cons)
    }

    /// Free slots: those known free, and if fewer than `want`, after
    /// reading the consumer's index (acquire).
    #[inline]
    pub fn free(&mut self, cons: &impl RingIndex, want: u32) -> u32 {
        self.free_with(cons, want, Ordering::Acquire)
    }

    /// [`Producer::free`] with the consumer's index read at `order` (the
    /// loom model's broken variant reads it relaxed).
    #[inline(always)]
    fn free_with(&mut self, cons: &impl RingIndex, want: u32, order: Ordering) -> u32 {
        let known = self.known_free();
        if known >= want {
            return known;
        }
        self.cons = cons.load(order);
        self.known_free()
    }

    /// The broken variant the loom model must catch: [`Producer::free`]
    /// reading the consumer's index without acquire, so a slot may be
    /// overwritten before the consumer's read of it.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn free_relaxed(&mut self, cons: &impl RingIndex, want: u32) -> u32 {
        self.free_with(cons, want, Ordering::Relaxed)
    }

    /// The slot of the `i`-th entry after those published.
    #[inline]
    pub fn slot(&self, i: u32) -> usize {
        (self.prod.wrapping_add(i) & self.mask) as usize
    }

    /// Publishes `n` entries written into `slot(0..n)` (release).
    #[inline]
    pub fn submit(&mut self, prod: &impl RingIndex, n: u32) {
        self.submit_with(prod, n, Ordering::Release);
    }

    /// [`Producer::submit`] storing the index at `order`.
    #[inline(always)]
    fn submit_with(&mut self, prod: &impl RingIndex, n: u32, order: Ordering) {
        self.prod = self.prod.wrapping_add(n);
        prod.store(self.prod, order);
    }

    /// The broken variant the loom model must catch: publishing without
    /// release, so the consumer may read a slot before its write.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn submit_relaxed(&mut self, prod: &impl RingIndex, n: u32) {
        self.submit_with(prod, n, Ordering::Relaxed);
    }

    /// Entries published and not yet consumed, as last known (reading the
    /// consumer's index, acquire).
    #[inline]
    pub fn outstanding(&mut self, cons: &impl RingIndex) -> u32 {
        self.cons = cons.load(Ordering::Acquire);
        self.prod.wrapping_sub(self.cons)
    }
}

/// The consuming side of a ring (ours: RX and completion; the kernel's:
/// fill and TX).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Consumer {
    mask: u32,
    /// The producer's index as last read.
    prod: u32,
    /// Our index: slots below it are consumed.
    cons: u32,
}

impl Consumer {
    /// A consumer of a fresh ring of `size` slots (a power of two).
    pub fn new(size: u32) -> Consumer {
        debug_assert!(size.is_power_of_two());
        Consumer {
            mask: size - 1,
            prod: 0,
            cons: 0,
        }
    }

    /// Entries ready to read, at most `max`: those known, and if fewer
    /// than `max`, after reading the producer's index (acquire).
    #[inline]
    pub fn available(&mut self, prod: &impl RingIndex, max: u32) -> u32 {
        self.available_with(prod, max, Ordering::Acquire)
    }

    /// [`Consumer::available`] with the producer's index read at `order`.
    #[inline(always)]
    fn available_with(&mut self, prod: &impl RingIndex, max: u32, order: Ordering) -> u32 {
        let mut n = self.prod.wrapping_sub(self.cons);
        if n < max {
            self.prod = prod.load(order);
            n = self.prod.wrapping_sub(self.cons);
        }
        n.min(max)
    }

    /// The broken variant the loom model must catch: [`Consumer::available`]
    /// reading the producer's index without acquire, so a slot may be read
    /// before the producer's write of it.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn available_relaxed(&mut self, prod: &impl RingIndex, max: u32) -> u32 {
        self.available_with(prod, max, Ordering::Relaxed)
    }

    /// The slot of the `i`-th entry not yet consumed.
    #[inline]
    pub fn slot(&self, i: u32) -> usize {
        (self.cons.wrapping_add(i) & self.mask) as usize
    }

    /// Frees the `n` slots read (release).
    #[inline]
    pub fn release(&mut self, cons: &impl RingIndex, n: u32) {
        self.release_with(cons, n, Ordering::Release);
    }

    /// [`Consumer::release`] storing the index at `order`.
    #[inline(always)]
    fn release_with(&mut self, cons: &impl RingIndex, n: u32, order: Ordering) {
        self.cons = self.cons.wrapping_add(n);
        cons.store(self.cons, order);
    }

    /// The broken variant the loom model must catch: freeing slots without
    /// release, so the producer may overwrite a slot before our read of it.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn release_relaxed(&mut self, cons: &impl RingIndex, n: u32) {
        self.release_with(cons, n, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn free_and_available_follow_the_indices_across_the_wrap() {
        let (p_idx, c_idx) = (AtomicU32::new(0), AtomicU32::new(0));
        let mut p = Producer::new(4);
        let mut c = Consumer::new(4);
        assert_eq!(p.free(&c_idx, 1), 4);
        assert_eq!(c.available(&p_idx, 8), 0);
        // Many laps, with the indices starting near u32::MAX.
        p.prod = u32::MAX - 5;
        p.cons = p.prod;
        c.prod = p.prod;
        c.cons = p.prod;
        p_idx.store(p.prod, Ordering::Relaxed);
        c_idx.store(p.prod, Ordering::Relaxed);
        for lap in 0..20u32 {
            let want = lap % 4 + 1;
            // Known free slots suffice without reading the index; asking
            // for all of them reads it.
            assert!(p.free(&c_idx, want) >= want, "lap {lap}");
            assert_eq!(p.free(&c_idx, 4), 4, "lap {lap}");
            let slots: Vec<usize> = (0..want).map(|i| p.slot(i)).collect();
            p.submit(&p_idx, want);
            assert_eq!(p.free(&c_idx, 1), 4 - want);
            assert_eq!(c.available(&p_idx, 8), want);
            assert_eq!((0..want).map(|i| c.slot(i)).collect::<Vec<_>>(), slots);
            assert!(slots.iter().all(|&s| s < 4));
            c.release(&c_idx, want);
        }
    }

    #[test]
    fn a_full_ring_has_no_free_slot_until_the_consumer_releases() {
        let (p_idx, c_idx) = (AtomicU32::new(0), AtomicU32::new(0));
        let mut p = Producer::new(2);
        let mut c = Consumer::new(2);
        p.submit(&p_idx, 2);
        assert_eq!(p.free(&c_idx, 1), 0);
        assert_eq!(p.outstanding(&c_idx), 2);
        assert_eq!(c.available(&p_idx, 1), 1, "capped at max");
        c.release(&c_idx, 1);
        assert_eq!(p.free(&c_idx, 1), 1);
        assert_eq!(c.available(&p_idx, 4), 1);
        c.release(&c_idx, 1);
        assert_eq!(p.outstanding(&c_idx), 0);
    }
}
