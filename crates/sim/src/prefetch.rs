//! The crate's only `unsafe` code: a cache prefetch hint for the engine's
//! hot loop (the crate root denies `unsafe_code`; this module alone is
//! allowed it).

/// Asks the CPU to bring `r` into the cache without waiting for it (a
/// hint: no effect on results; a no-op off x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(r: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program can observe and cannot
    // fault; `r` is a valid reference anyway. SSE, which the intrinsic
    // needs, is part of the x86-64 baseline.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
            std::ptr::from_ref(r).cast(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
