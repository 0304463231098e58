//! Synchronisation primitives behind a facade, so the same code runs on `std`
//! in normal builds and on [loom](https://docs.rs/loom)'s model checker when
//! compiled with `RUSTFLAGS="--cfg loom"` (the tokio / crossbeam pattern).
//!
//! Only what the lock-free code in this crate needs is exported. `UnsafeCell`
//! mirrors loom's closure-based API (`with` / `with_mut`), because loom can only
//! check the accesses it sees go through that API.

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;
#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence,
};
#[cfg(loom)]
pub(crate) use loom::thread::{Thread, current, park, yield_now};

#[cfg(not(loom))]
pub(crate) use std::sync::Arc;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::thread::{Thread, current, park, yield_now};

/// `std::cell::UnsafeCell` with loom's access API.
///
/// `with` and `with_mut` only hand out raw pointers; dereferencing them is the
/// caller's (unsafe) business, exactly as with loom's cell.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `value`.
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Calls `f` with a shared raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Calls `f` with a mutable raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
