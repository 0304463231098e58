//! The doorbell: how producers tell one consumer thread *which* of their
//! queues have news, and wake it if it sleeps.
//!
//! This is the userspace form of PSPAT's per-CPU client lists plus the
//! arbiter's sleep/wake-up. Each producer (a client) has an id; the consumer
//! (the arbiter, or a dispatcher) keeps its own private list of *recently
//! active* producers and scans only those, not every registered one.
//!
//! * **Ring** (producer side, after publishing work in its own queue): a
//!   [`barrier::light`] barrier, then look at its bit in a shared bitmap and
//!   set it only if it is clear — PSPAT's "append the client to the CPU's
//!   list only if it is not already its last entry": a client that keeps
//!   sending touches the shared word once per arbiter round, not once per
//!   packet. Then look at the sleeper's flag and wake it if it is set. Only
//!   the consumer writes that flag; producers only read it.
//! * **Take** (consumer side): swap each non-zero word with 0 and hand out
//!   the ids found. The consumer then keeps reading those producers' queues
//!   until it *settles* one as idle.
//! * **Settle** (consumer side, before dropping a producer from its list):
//!   [`Doorbell::settle`] (a [`barrier::heavy`] barrier), then read the
//!   producer's queue once more; drop it only if that read finds nothing.
//! * **Sleep** (consumer side): store "sleeping", heavy barrier, re-check
//!   *every* work source (the bitmap and all queues), and only then park.
//!
//! # Why no item and no wake-up is lost
//!
//! Producer: publish `P`; light barrier `L`; load bit; load sleeping.
//! The light/heavy pair orders like two `SeqCst` fences: for a heavy `H` on
//! the consumer, either `L` comes first (the consumer's loads after `H` see
//! `P`) or `H` does (the producer's loads after `L` see every store the
//! consumer made before `H`).
//!
//! * The producer's bit load reads `0`: it sets the bit (a `Release` RMW
//!   after `P`), so a later take, whose swap acquires it, re-activates the
//!   producer and its reads see `P`.
//! * It reads `1`: that bit is cleared by some take `S` of the consumer. If
//!   `S` comes after the settle `H` that would drop the producer, the take
//!   re-activates it. If `S` comes before `H`: when `L` precedes `H`, the
//!   re-read after `H` sees `P` and the producer is kept; when `H` precedes
//!   `L`, the producer's bit load must see `S` or a later store — not the
//!   `1` that `S` cleared, a contradiction, unless another ring of the same
//!   producer set it again, and then a later take re-activates it.
//! * Going to sleep: the consumer stores "sleeping", `H`, re-checks all
//!   queues and bits. If `L` precedes `H`, the re-check sees `P` and the
//!   consumer does not sleep; otherwise the producer's load after `L` sees
//!   "sleeping" and unparks it (a park token is never lost, even if the
//!   unpark comes before the park).
//!
//! `tests/loom_doorbell.rs` model-checks this with both barriers as `SeqCst`
//! fences (what the pair implements), with a variant that drops the
//! producer's barrier, which loom must catch as a lost wake-up (deadlock).

use std::sync::OnceLock;
#[cfg(not(loom))]
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::barrier;
use crate::sync::{AtomicBool, AtomicU64, Ordering, Thread, current, park};

/// Bits per bitmap word.
const WORD: usize = 64;

/// Where producer `id`'s bit is in the doorbell's bitmap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BellBit {
    word: usize,
    mask: u64,
}

impl BellBit {
    /// Producer `id`'s bit (ids at or above a doorbell's
    /// [`Doorbell::capacity`] ring no bit there, as with [`Doorbell::ring`]).
    pub fn of(id: usize) -> BellBit {
        BellBit {
            word: id / WORD,
            mask: 1u64 << (id % WORD),
        }
    }
}

/// A bitmap of producers with news plus one sleeping consumer.
pub struct Doorbell {
    words: Box<[CachePadded<AtomicU64>]>,
    sleeping: CachePadded<AtomicBool>,
    thread: OnceLock<Thread>,
    #[cfg(loom)]
    skip_fence: AtomicBool,
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell")
            .field("ids", &self.capacity())
            .field("sleeping", &self.sleeping.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Doorbell {
    /// A doorbell for producer ids `0..ids`.
    pub fn new(ids: usize) -> Doorbell {
        barrier::init();
        let words = ids.max(1).div_ceil(WORD);
        Doorbell {
            words: (0..words)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            sleeping: CachePadded::new(AtomicBool::new(false)),
            thread: OnceLock::new(),
            #[cfg(loom)]
            skip_fence: AtomicBool::new(false),
        }
    }

    /// Number of producer ids.
    pub fn capacity(&self) -> usize {
        self.words.len() * WORD
    }

    /// Producer side: call after publishing work in producer `id`'s queue.
    /// Returns `true` if the consumer had announced sleep (it was unparked).
    ///
    /// Ids at or above [`Doorbell::capacity`] are ignored (the caller
    /// assigns ids; the runtime never hands out such an id).
    #[inline]
    pub fn ring(&self, id: usize) -> bool {
        self.ring_bit(BellBit::of(id))
    }

    /// [`Doorbell::ring`] for the producer whose bit is `b` (worked out
    /// once, when the producer is made: no division per ring).
    #[inline]
    pub fn ring_bit(&self, b: BellBit) -> bool {
        self.ring_bit_with(b, barrier::Light::mode())
    }

    /// [`Doorbell::ring_bit`] with the light barrier's mode already read
    /// (by a caller that issued a light barrier of its own before).
    #[inline]
    pub fn ring_bit_with(&self, b: BellBit, light: barrier::Light) -> bool {
        #[cfg(loom)]
        let fenced = !self.skip_fence.load(Ordering::Relaxed);
        #[cfg(not(loom))]
        let fenced = true;
        if fenced {
            light.fence();
        }
        if let Some(word) = self.words.get(b.word)
            && word.load(Ordering::Relaxed) & b.mask == 0
        {
            word.fetch_or(b.mask, Ordering::Release);
        }
        self.wake()
    }

    /// Wakes the consumer if it announced sleep. The caller must have
    /// published its work and issued a light barrier ([`Doorbell::ring`]
    /// does both).
    ///
    /// Producers only *read* `sleeping`; the consumer alone writes it. While
    /// it sleeps, every ring unparks it again, which costs one atomic swap on
    /// the thread's parker when it is already awake.
    #[inline]
    fn wake(&self) -> bool {
        if self.sleeping.load(Ordering::Relaxed) {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
            return true;
        }
        false
    }

    /// Consumer side: hands every producer id whose bit was set to `f` and
    /// clears those bits. The consumer must keep reading those producers'
    /// queues until it settles them as idle (see [`Doorbell::settle`]).
    #[inline]
    pub fn take(&self, mut f: impl FnMut(usize)) {
        for (w, word) in self.words.iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                f(w * WORD + b);
            }
        }
    }

    /// Consumer side: call before dropping producers from the list of
    /// active ones, then read each such producer's queue once more and drop
    /// only those still empty. Costs a few µs in asymmetric mode: batch it.
    pub fn settle(&self) {
        barrier::heavy();
    }

    /// `true` if any bit is set (a cheap look, no clearing).
    pub fn any(&self) -> bool {
        self.words.iter().any(|w| w.load(Ordering::Relaxed) != 0)
    }

    /// Consumer side: records the calling thread as the one to unpark. Call
    /// once, from the consumer thread, before the first
    /// [`Doorbell::announce_sleep`].
    /// Later calls (from any thread) are ignored.
    pub fn register_consumer(&self) {
        let _ = self.thread.set(current());
    }

    /// Consumer side: announce the intention to sleep. The consumer must then
    /// re-check **every** work source (all queues, [`Doorbell::any`]) and
    /// call [`Doorbell::cancel_sleep`] if it finds work, else
    /// [`Doorbell::sleep`].
    pub fn announce_sleep(&self) {
        self.sleeping.store(true, Ordering::Relaxed);
        barrier::heavy();
    }

    /// Consumer side: found work after announcing; stay awake.
    pub fn cancel_sleep(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Consumer side: park until a producer rings, then stop announcing.
    /// It may also return early (a stale unpark token from a ring that
    /// raced with [`Doorbell::cancel_sleep`], or a spurious wake-up): the
    /// caller loops and re-checks its work anyway.
    pub fn sleep(&self) {
        park();
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Consumer side: park until a producer rings or `timeout` passes.
    #[cfg(not(loom))]
    pub fn sleep_timeout(&self, timeout: Duration) {
        std::thread::park_timeout(timeout);
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Loom builds only: ring without the producer's barrier — a deliberate
    /// bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_skip_fence(&self) {
        self.skip_fence.store(true, Ordering::Relaxed);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn take_returns_each_rung_id_once() {
        let d = Doorbell::new(130);
        assert_eq!(d.capacity(), 192);
        for id in [0, 63, 64, 129, 63] {
            d.ring(id);
        }
        d.ring(1000); // out of range: ignored
        d.ring_bit(BellBit::of(5)); // the bit `ring(5)` sets
        let mut got = Vec::new();
        d.take(|id| got.push(id));
        assert_eq!(got, vec![0, 5, 63, 64, 129]);
        assert!(!d.any());
        let mut again = Vec::new();
        d.take(|id| again.push(id));
        assert!(again.is_empty());
    }

    #[test]
    fn ring_wakes_only_an_announced_sleeper() {
        let d = Doorbell::new(1);
        d.register_consumer();
        assert!(!d.ring(0));
        d.announce_sleep();
        assert!(d.ring(0));
        // The token left by the unpark makes this return at once.
        d.sleep();
        assert!(!d.ring(0), "sleep() ends the announcement");
        d.announce_sleep();
        d.cancel_sleep();
        assert!(!d.ring(0));
    }
}
