//! The few system calls pktsched-run makes itself (the devices' are in
//! `pktsched-io`).

mod napi;
mod napi_state;
mod napi_thread;
mod placement;

pub use napi::{
    ApplyError, BUSY_POLL_DEFER_HARD_IRQS, BUSY_POLL_GRO_FLUSH_NS, NapiSettings, STATE_DIR,
};
pub use napi_state::refuse_if_held;
pub use napi_thread::{ThreadedNapi, napi_threads, place_thread};
pub use placement::{Placed, allowed_cpus, calling_thread_policy, cpu_list, place_calling_thread};

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
    drop_capabilities_except(0)
}

/// `CAP_NET_ADMIN`'s bit in a capability mask.
pub const CAP_NET_ADMIN: u64 = 1 << 12;

/// Like [`drop_capabilities`], but keeps those of `keep` (a mask of
/// capability bits, e.g. [`CAP_NET_ADMIN`]) that the thread has, in its
/// effective and permitted sets.
pub fn drop_capabilities_except(keep: u64) -> std::io::Result<()> {
    let keep = keep & effective_capabilities().unwrap_or(0);
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
    let word = |i: u32| (keep >> (32 * i)) as u32;
    let data = [0, 1].map(|i| Data {
        effective: word(i),
        permitted: word(i),
        inheritable: 0,
    });
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

/// A user to run as (`pktsched run --user`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The name as given.
    pub name: String,
    /// Its user id.
    pub uid: u32,
    /// Its primary group id.
    pub gid: u32,
}

/// Longest user name accepted (Linux's `LOGIN_NAME_MAX` is 256).
const MAX_USER_NAME: usize = 256;

/// Looks `name` up in the user database (`getpwnam_r`: /etc/passwd, or
/// whatever NSS is configured). The error names the value and what is
/// allowed.
pub fn lookup_user(name: &str) -> Result<User, String> {
    let bad = |why: &str| format!("--user {name:?}: {why}");
    if name.is_empty() || name.len() > MAX_USER_NAME {
        return Err(bad(&format!("a user name is 1..={MAX_USER_NAME} bytes")));
    }
    let cname = std::ffi::CString::new(name).map_err(|_| bad("a user name has no NUL byte"))?;
    // SAFETY: an all-zero passwd (null pointers, zero ids) is a valid
    // value of the C struct; getpwnam_r fills it.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: `cname` is NUL-terminated; `pwd`, `buf` (of the length
    // passed) and `result` are valid and writable for the call; the
    // strings written into `buf` are not read here (only the ids).
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    if rc != 0 {
        let e = std::io::Error::from_raw_os_error(rc);
        return Err(bad(&format!("the user database could not be read ({e})")));
    }
    if result.is_null() {
        return Err(bad(
            "no such user (allowed: a name in the user database, e.g. /etc/passwd)",
        ));
    }
    Ok(User {
        name: name.to_string(),
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

/// Switches the whole process (every thread: the C library's `setgid` and
/// `setuid` apply to all of them) to `user`: supplementary groups set to
/// its group alone, then the group, then the user. Changing from root to
/// another user clears the permitted and effective capabilities. Called
/// once the sockets are open and before any other thread starts.
pub fn become_user(user: &User) -> std::io::Result<()> {
    let groups = [user.gid as libc::gid_t];
    // SAFETY: one valid gid_t read by the call; no other memory is passed.
    if unsafe { libc::setgroups(1, groups.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: plain integer arguments.
    if unsafe { libc::setgid(user.gid) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: plain integer arguments.
    if unsafe { libc::setuid(user.uid) } != 0 {
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
    fn users_are_found_by_name_and_unknown_ones_refused_by_name() {
        let root = lookup_user("root").expect("root exists");
        assert_eq!((root.uid, root.gid), (0, 0));
        let e = lookup_user("no-such-user-vc").expect_err("unknown");
        assert!(
            e.contains("\"no-such-user-vc\"") && e.contains("no such user"),
            "{e}"
        );
        let e = lookup_user("").expect_err("empty");
        assert!(e.contains("1..=256"), "{e}");
        let e = lookup_user("a\0b").expect_err("NUL");
        assert!(e.contains("NUL"), "{e}");
        let e = lookup_user(&"x".repeat(300)).expect_err("long");
        assert!(e.contains("1..=256"), "{e}");
    }

    #[test]
    fn the_monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
