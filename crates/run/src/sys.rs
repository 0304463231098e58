//! The few system calls pktsched-run makes itself (the devices' are in
//! `pktsched-io`).

/// Sets the calling thread's timer slack (ns), so the idle arbiter's short
/// sleeps end on time (the default slack is 50 µs). Best effort.
pub(crate) fn set_timer_slack(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only changes
    // the calling thread's timer slack; no memory is passed.
    let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong) };
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every network namespace
/// of the machine, so a generator's send stamp and a sink's receive time
/// compare directly.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the
    // call; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

/// Drops every capability of the calling thread (threads it starts later
/// inherit the empty sets) and forbids regaining any through exec
/// (`PR_SET_NO_NEW_PRIVS`). Called once the sockets are open: the shaper
/// needs no privilege to run, reload or stop. Returns the OS error if the
/// kernel refused.
pub fn drop_capabilities() -> std::io::Result<()> {
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
    const VERSION_3: u32 = 0x2008_0522;
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: PR_SET_NO_NEW_PRIVS takes plain integer arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: capset reads one header and two data structs of the layout
    // the kernel defines for version 3; both live across the call.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's effective capability set (the low word), from
/// `/proc/thread-self/status` (tests and diagnostics).
pub fn effective_capabilities() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line.split_whitespace().nth(1)?, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Capabilities are per thread: dropping them on a thread of its own
    /// leaves the test process alone.
    #[test]
    fn a_thread_can_drop_every_capability() {
        let before = effective_capabilities();
        let after = std::thread::spawn(|| {
            drop_capabilities().expect("capset");
            effective_capabilities()
        })
        .join()
        .expect("thread");
        assert_eq!(after, Some(0));
        assert_eq!(effective_capabilities(), before);
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
