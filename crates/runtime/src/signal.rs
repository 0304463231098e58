//! SIGINT and SIGTERM as a flag that long runs poll at safe points.
//!
//! [`install`] replaces the default action of both signals (terminate at
//! once, losing whatever was measured) with a handler that only records
//! the signal. A benchmark, simulation or daemon checks [`stop_flag`]
//! between steps, stops cleanly, prints what it has (marked partial) and
//! exits with [`Signal::exit_code`] (130 or 143, as a shell reports a
//! process killed by the signal). The handler is one-shot: a second Ctrl-C
//! finds the default action back and ends the process at once, so a run
//! that never reaches a safe point can still be stopped.
//!
//! A daemon also calls [`install_reload`]: SIGHUP then sets a flag that
//! [`take_reload`] reads and clears (re-read the config, like nginx).

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Set when SIGINT or SIGTERM arrives.
static STOP: AtomicBool = AtomicBool::new(false);
/// The signal number that set [`STOP`] first.
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// A signal asking the process to stop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl Signal {
    /// The conventional exit status after stopping for this signal
    /// (128 + the signal number: 130 for SIGINT, 143 for SIGTERM).
    pub const fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
        }
    }

    /// The signal's name, as `kill -l` prints it.
    pub const fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        }
    }
}

/// The flag the handlers set; pass it to the loops that should stop.
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// The signal that arrived, if one did.
pub fn received() -> Option<Signal> {
    if !STOP.load(Ordering::Acquire) {
        return None;
    }
    Some(if SIGNAL.load(Ordering::Relaxed) == libc::SIGTERM {
        Signal::Terminate
    } else {
        Signal::Interrupt
    })
}

/// Set when SIGHUP arrives; cleared by [`take_reload`].
static RELOAD: AtomicBool = AtomicBool::new(false);

/// `true` once per SIGHUP received since the last call.
pub fn take_reload() -> bool {
    RELOAD.swap(false, Ordering::AcqRel)
}

extern "C" fn record_reload(_signo: libc::c_int) {
    // One lock-free atomic store: async-signal-safe.
    RELOAD.store(true, Ordering::Release);
}

/// Installs a SIGHUP handler that requests a reload (kept for every SIGHUP,
/// not one-shot).
pub fn install_reload() -> std::io::Result<()> {
    // SAFETY: `sigaction` is plain data; all-zero is a valid value (empty
    // mask, no flags) that is filled in below.
    let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
    action.sa_sigaction = record_reload as extern "C" fn(libc::c_int) as libc::sighandler_t;
    action.sa_flags = libc::SA_RESTART;
    // SAFETY: the handler only stores to an atomic (async-signal-safe);
    // `action` is initialised and outlives the call; a null old-action
    // pointer is allowed.
    let rc = unsafe { libc::sigaction(libc::SIGHUP, &action, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

extern "C" fn record(signo: libc::c_int) {
    // Only lock-free atomic stores: async-signal-safe.
    let _ = SIGNAL.compare_exchange(0, signo, Ordering::Relaxed, Ordering::Relaxed);
    STOP.store(true, Ordering::Release);
}

/// Installs the one-shot handlers for SIGINT and SIGTERM.
pub fn install() -> std::io::Result<()> {
    for signo in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain data; all-zero is a valid value
        // (empty mask, no flags) that is filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = record as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESETHAND: the second signal gets the default action back.
        // SA_RESTART: interrupted system calls resume instead of failing.
        action.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: the handler only stores to atomics (async-signal-safe);
        // `action` is initialised and outlives the call; a null old-action
        // pointer is allowed.
        let rc = unsafe { libc::sigaction(signo, &action, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_recorded_not_fatal() {
        assert_eq!(Signal::Interrupt.exit_code(), 130);
        assert_eq!(Signal::Terminate.exit_code(), 143);
        install().expect("install handlers");
        assert_eq!(received(), None);
        // SAFETY: raising a signal whose handler was just installed; the
        // handler only stores to atomics.
        let rc = unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(rc, 0);
        assert!(stop_flag().load(Ordering::Acquire));
        assert_eq!(received(), Some(Signal::Terminate));
    }

    #[test]
    fn sighup_requests_one_reload_each_time() {
        install_reload().expect("install");
        assert!(!take_reload());
        for _ in 0..2 {
            // SAFETY: the SIGHUP handler was just installed; it only stores
            // to an atomic.
            assert_eq!(unsafe { libc::raise(libc::SIGHUP) }, 0);
            assert!(take_reload());
            assert!(!take_reload());
        }
    }
}
