//! Asymmetric memory barriers: a nearly free [`light`] barrier on the hot
//! path (every client send) paired with an expensive [`heavy`] barrier on
//! the rare path (the arbiter trimming its client list, going to sleep, or
//! stopping).
//!
//! The runtime's hand-offs are store-buffering patterns: one side stores
//! (a packet, `busy`), then loads the other side's flag (`sleeping`, `stop`,
//! a doorbell bit); the other side stores its flag, then loads the first
//! side's data. Each side needs a full barrier between its store and its
//! load, or both may miss each other. A `SeqCst` fence on x86 is `MFENCE`
//! (tens of cycles, and it drains the store buffer); paying it on every send
//! was half of a client's cost per packet.
//!
//! On Linux the `membarrier(2)` system call with
//! `MEMBARRIER_CMD_PRIVATE_EXPEDITED` makes every other running thread of
//! the process execute a full barrier before the call returns (threads not
//! running pass through one when they are switched out). So a compiler-only
//! fence on the light side plus `membarrier` on the heavy side orders the
//! pair exactly as two `SeqCst` fences would: whichever way the two sides
//! interleave, one of them sees the other's store. This is the pairing the
//! Linux kernel documents for `membarrier` and that liburcu and folly's
//! `asymmetric_thread_fence_{light,heavy}` use.
//!
//! Where `membarrier` is not available (other systems, old kernels, seccomp
//! filters, Miri) both sides fall back to `SeqCst` fences. Under loom both
//! are loom's `SeqCst` fence: the model checks the protocols with symmetric
//! fences, which is what the asymmetric pair implements.

#[cfg(not(loom))]
use std::sync::atomic::AtomicU8;

use crate::sync::{Ordering, fence};

/// Not yet probed.
#[cfg(not(loom))]
const UNKNOWN: u8 = 0;
/// `SeqCst` fences on both sides.
#[cfg(not(loom))]
const SYMMETRIC: u8 = 1;
/// Compiler fence / `membarrier`.
#[cfg(not(loom))]
const ASYMMETRIC: u8 = 2;

#[cfg(not(loom))]
static MODE: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Decides once per process whether the asymmetric pair is available (and
/// registers the process for it). Must run before any thread relies on
/// [`light`]; the runtime calls it when it creates a doorbell, before any
/// client or consumer can exist. The mode never changes afterwards, so a
/// [`light`] that skipped the CPU fence is always paired with a [`heavy`]
/// that issues `membarrier`.
pub fn init() {
    #[cfg(not(loom))]
    {
        if MODE.load(Ordering::Acquire) != UNKNOWN {
            return;
        }
        let mode = if membarrier::register() {
            ASYMMETRIC
        } else {
            SYMMETRIC
        };
        // Racing initialisers compute the same answer; the first one wins.
        let _ = MODE.compare_exchange(UNKNOWN, mode, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// `true` if [`light`] is a compiler fence only (the `membarrier` pair).
pub fn asymmetric() -> bool {
    #[cfg(not(loom))]
    {
        MODE.load(Ordering::Relaxed) == ASYMMETRIC
    }
    #[cfg(loom)]
    {
        false
    }
}

/// The hot side's barrier: orders this thread's earlier stores before its
/// later loads *with respect to a [`heavy`] on another thread*.
#[inline(always)]
pub fn light() {
    Light::mode().fence();
}

/// The light barrier's mode, read once for a call that issues several
/// light barriers (a client's send: one after announcing itself busy, one
/// before ringing). The mode never changes once decided, so this is the
/// same barrier as [`light`] without a load of the mode each time.
#[derive(Clone, Copy, Debug)]
pub struct Light {
    /// A compiler fence suffices (the `membarrier` pair).
    #[cfg(not(loom))]
    compiler_only: bool,
    /// Loom builds only: no barrier at all (a broken variant).
    #[cfg(loom)]
    skipped: bool,
}

impl Light {
    /// The mode now (decided by [`init`]).
    #[inline(always)]
    pub fn mode() -> Self {
        Light {
            #[cfg(not(loom))]
            compiler_only: MODE.load(Ordering::Relaxed) == ASYMMETRIC,
            #[cfg(loom)]
            skipped: false,
        }
    }

    /// Loom builds only: a light barrier that is no barrier — a
    /// deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_skipped() -> Self {
        Light { skipped: true }
    }

    /// [`light`], in this mode.
    #[inline(always)]
    pub fn fence(self) {
        #[cfg(not(loom))]
        {
            if self.compiler_only {
                std::sync::atomic::compiler_fence(Ordering::SeqCst);
                return;
            }
        }
        #[cfg(loom)]
        {
            if self.skipped {
                return;
            }
        }
        fence(Ordering::SeqCst);
    }
}

/// The rare side's barrier: a full barrier here and, in asymmetric mode, on
/// every other running thread of the process (a few µs).
pub fn heavy() {
    #[cfg(not(loom))]
    {
        if MODE.load(Ordering::Relaxed) == ASYMMETRIC {
            fence(Ordering::SeqCst);
            if membarrier::expedited() {
                return;
            }
            // Registered but refused now: cannot happen per the man page;
            // there is no safe way to continue without the guarantee (light
            // barriers elsewhere already relied on it).
            eprintln!(
                "pktsched-runtime: membarrier(PRIVATE_EXPEDITED) failed after \
                 registration: {}; aborting (memory ordering can no longer \
                 be guaranteed)",
                std::io::Error::last_os_error()
            );
            std::process::abort();
        }
    }
    fence(Ordering::SeqCst);
}

/// The stop handshake between the threads that send (clients, inside
/// `send` / `send_batch`) and the one that stops them (the arbiter's
/// `close_and_drain`): the store-buffering pair of this module's barriers
/// over two flags, each sender's `busy` and the shared `stop`.
///
/// A sender [`enter`](stop::enter)s (stores `busy`, light barrier, loads
/// `stop`), publishes, then [`leave`](stop::leave)s (Release of `busy`).
/// The stopper [`close`](stop::close)s (stores `stop`, heavy barrier), then
/// [`wait_idle`](stop::wait_idle)s on each sender's `busy` (Acquire). The
/// barrier pair orders like two `SeqCst` fences, so either the sender sees
/// `stop` and gives up, or the stopper sees `busy` and waits for its
/// Release, after what the sender published: a drain after `wait_idle`
/// sees it. `tests/loom_stop.rs` model-checks the handshake with these
/// functions, and with each barrier or the Release left out (broken
/// variants loom must reject).
pub mod stop {
    use super::{Light, heavy};
    use crate::sync::{AtomicBool, Ordering, yield_now};

    /// Sender side: announces `busy`, light barrier (in `light`'s mode),
    /// looks at the flag `stop` returns. `true`: go on, and [`leave`] once
    /// what is sent is published; `false`: stopped, and `busy` is already
    /// withdrawn.
    ///
    /// `stop` reaches the flag after the barrier, as `send` did when it
    /// had this inline: passing `&AtomicBool` instead kept the flag's
    /// address live across the (compiler-only) barrier and cost a client's
    /// send an instruction per packet (`ci/instructions.sh`).
    #[inline(always)]
    pub fn enter<'s>(
        busy: &AtomicBool,
        light: Light,
        stop: impl FnOnce() -> &'s AtomicBool,
    ) -> bool {
        busy.store(true, Ordering::Relaxed);
        light.fence();
        if stop().load(Ordering::Relaxed) {
            leave(busy);
            return false;
        }
        true
    }

    /// Sender side: withdraws `busy` (Release: what the sender published
    /// since [`enter`] is visible to a stopper that sees `busy` clear).
    #[inline(always)]
    pub fn leave(busy: &AtomicBool) {
        busy.store(false, Ordering::Release);
    }

    /// Stopper side: stores `stop`, heavy barrier. Then [`wait_idle`] on
    /// every sender's `busy`.
    pub fn close(stop: &AtomicBool) {
        stop.store(true, Ordering::Relaxed);
        heavy();
    }

    /// Stopper side, after [`close`]: waits until the sender whose flag
    /// is `busy` is outside `enter`…`leave` (it can enter again only to
    /// be refused).
    pub fn wait_idle(busy: &AtomicBool) {
        while busy.load(Ordering::Acquire) {
            std::hint::spin_loop();
            yield_now();
        }
    }

    /// Loom builds only: [`leave`] with a relaxed store — a deliberate
    /// bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_leave_relaxed(busy: &AtomicBool) {
        busy.store(false, Ordering::Relaxed);
    }

    /// Loom builds only: [`close`] without the heavy barrier — a
    /// deliberate bug the model checker must catch.
    #[cfg(loom)]
    #[doc(hidden)]
    pub fn loom_close_without_barrier(stop: &AtomicBool) {
        stop.store(true, Ordering::Relaxed);
    }
}

#[cfg(all(target_os = "linux", not(loom), not(miri)))]
mod membarrier {
    const CMD_QUERY: libc::c_long = 0;
    const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

    fn call(cmd: libc::c_long) -> libc::c_long {
        // SAFETY: membarrier(cmd, flags = 0, cpu_id = 0) takes no pointers
        // and touches no memory of ours; the worst outcome is an error code
        // (ENOSYS, EINVAL, EPERM), which the callers check.
        unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                cmd,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        }
    }

    /// Registers the process for private expedited barriers if the kernel
    /// offers them.
    pub(super) fn register() -> bool {
        let cmds = call(CMD_QUERY);
        if cmds < 0 || cmds & CMD_PRIVATE_EXPEDITED == 0 {
            return false;
        }
        call(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    pub(super) fn expedited() -> bool {
        call(CMD_PRIVATE_EXPEDITED) == 0
    }
}

#[cfg(all(not(all(target_os = "linux", not(miri))), not(loom)))]
mod membarrier {
    pub(super) fn register() -> bool {
        false
    }
    pub(super) fn expedited() -> bool {
        false
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn init_is_idempotent_and_the_pair_runs() {
        init();
        let mode = asymmetric();
        init();
        assert_eq!(asymmetric(), mode, "the mode never changes");
        light();
        heavy();
    }

    /// The store-buffering litmus test with the pair, on real threads: the
    /// outcome "both sides read the other's store as not yet done" must never
    /// occur. (It can only catch broken barriers, not prove them correct:
    /// that is loom's part for the protocols and the kernel's for
    /// `membarrier`.)
    #[test]
    fn store_buffering_never_loses_both() {
        use std::sync::Arc;
        use std::sync::atomic::AtomicU64;
        init();
        let rounds = 5_000u64;
        // x: the light side's store; y: the heavy side's; go/fin: round
        // hand-shakes; seen: what the light side read of y in its round.
        let [x, y, go, fin, seen] = std::array::from_fn(|_| Arc::new(AtomicU64::new(0)));
        let (x2, y2, go2, fin2, seen2) =
            (x.clone(), y.clone(), go.clone(), fin.clone(), seen.clone());
        let t = std::thread::spawn(move || {
            for r in 1..=rounds {
                while go2.load(Ordering::Acquire) < r {
                    std::hint::spin_loop();
                }
                x2.store(r, Ordering::Relaxed);
                light();
                seen2.store(y2.load(Ordering::Relaxed), Ordering::Relaxed);
                fin2.store(r, Ordering::Release);
            }
        });
        for r in 1..=rounds {
            go.store(r, Ordering::Release);
            y.store(r, Ordering::Relaxed);
            heavy();
            let heavy_saw = x.load(Ordering::Relaxed) >= r;
            while fin.load(Ordering::Acquire) < r {
                std::hint::spin_loop();
            }
            let light_saw = seen.load(Ordering::Relaxed) >= r;
            assert!(heavy_saw || light_saw, "round {r}: both sides missed");
        }
        t.join().expect("light side");
    }
}
