//! The consumer's software prefetch: a hint to the cache to start fetching
//! the hardware lines of a line of groups before the consumer reads them.
//!
//! When the consumer trails the producer by more than a line, the lines it
//! reads next were written on the producer's core; each first read of one
//! is a cross-core transfer. Asking for them a line ahead lets the transfer
//! overlap the pops of the current line. A prefetch is only a hint: it
//! reads nothing the program sees, cannot fault, and changes no value, so
//! it is outside the protocol (loom and Miri builds leave it out).

use super::ring::Group;

/// Asks the cache for every 64-byte line of `group` (a hint; see the
/// module docs). A no-op on targets without a stable prefetch instruction,
/// and under loom and Miri.
#[inline(always)]
pub(super) fn group<T, const H: usize>(group: &Group<T, H>) {
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let start = std::ptr::from_ref(group).cast::<i8>();
        for offset in (0..std::mem::size_of::<Group<T, H>>()).step_by(super::GROUP_BYTES) {
            // SAFETY: PREFETCHT0 is a hint that performs no architectural
            // memory access: it cannot fault and reads nothing the program
            // observes, so any address is sound; this one is inside
            // `group`, a live reference. SSE (which provides it) is part
            // of the x86_64 baseline, so the instruction always exists.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    let _ = group;
}
