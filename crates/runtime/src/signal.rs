//! SIGINT, SIGTERM and SIGHUP as a flag that long runs poll at safe points.
//!
//! [`install`] replaces the default action of the three signals (terminate
//! at once, losing whatever was measured; SIGHUP comes with a closed
//! terminal or an ssh session's end) with a handler that only records
//! the signal. A benchmark, simulation or daemon checks [`stop_flag`]
//! between steps, stops cleanly, prints what it has (marked partial) and
//! exits with [`Signal::exit_code`] (130, 143 or 129, as a shell reports a
//! process killed by the signal). A second stop signal (counted by
//! the handler itself, whatever else sets the flag) ends the process at once (the default action, as if no handler were there), so a
//! run that never reaches a safe point can still be stopped; before it
//! dies, the handler writes the files registered with [`set_last_writes`]
//! (settings the process changed outside itself, such as a device's sysfs
//! knobs, put back to what they were) with `open`/`write`/`close` only,
//! which are async-signal-safe.
//!
//! A daemon also calls [`install_reload`] (after [`install`]): SIGHUP then
//! no longer stops it but sets a flag that [`take_reload`] reads and
//! clears (re-read the config, like nginx).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};

/// Set when a stop signal (SIGINT, SIGTERM, SIGHUP) arrives.
static STOP: AtomicBool = AtomicBool::new(false);
/// The signal number that set [`STOP`] first.
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Stop signals received: the handler's own count (unlike
/// [`STOP`], handed out by [`stop_flag`], nothing else writes it), so only
/// a second signal ends the process.
static STOP_SIGNALS: AtomicU32 = AtomicU32::new(0);

/// A signal asking the process to stop.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// SIGHUP (the terminal or session went away), where no reload
    /// handler took it.
    Hangup,
}

impl Signal {
    /// The conventional exit status after stopping for this signal
    /// (128 + the signal number: 130 for SIGINT, 143 for SIGTERM, 129 for
    /// SIGHUP).
    pub const fn exit_code(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
            Signal::Hangup => 129,
        }
    }

    /// The signal's name, as `kill -l` prints it.
    pub const fn name(self) -> &'static str {
        match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
            Signal::Hangup => "SIGHUP",
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
    Some(match SIGNAL.load(Ordering::Relaxed) {
        libc::SIGTERM => Signal::Terminate,
        libc::SIGHUP => Signal::Hangup,
        _ => Signal::Interrupt,
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

/// Files to write, then files to remove, before a second stop signal ends
/// the process: built outside the handler so that it only makes system
/// calls.
struct LastWrites {
    writes: Vec<(CString, Vec<u8>)>,
    removes: Vec<CString>,
}

/// The registered [`LastWrites`] (null: none). A replaced or cleared list
/// is leaked, never freed: a handler running on another thread may still
/// be reading it (a few hundred bytes per busy-polling run).
static LAST_WRITES: AtomicPtr<LastWrites> = AtomicPtr::new(std::ptr::null_mut());

/// Registers files to write (path, content), then files to remove (only
/// if every write succeeded), if a second SIGINT or SIGTERM ends the
/// process before it stops cleanly; replaces any earlier lists. Paths with
/// a NUL byte are skipped.
pub fn set_last_writes(writes: &[(PathBuf, String)], removes: &[PathBuf]) {
    let c_path = |p: &PathBuf| CString::new(p.as_os_str().as_bytes()).ok();
    let list = LastWrites {
        writes: writes
            .iter()
            .filter_map(|(p, v)| Some((c_path(p)?, v.as_bytes().to_vec())))
            .collect(),
        removes: removes.iter().filter_map(c_path).collect(),
    };
    LAST_WRITES.store(Box::into_raw(Box::new(list)), Ordering::Release);
}

/// Forgets the files registered with [`set_last_writes`] (the process put
/// them back itself).
pub fn clear_last_writes() {
    LAST_WRITES.store(std::ptr::null_mut(), Ordering::Release);
}

/// Writes the registered files and, if every write succeeded, removes the
/// others (a state file kept tells the next run to put the values back);
/// async-signal-safe (no allocation, no locks: `open`, `write`, `close`,
/// `unlink`). Errors are not reported: the process is about to die and has
/// nowhere to report them.
fn write_last_writes() {
    let list = LAST_WRITES.load(Ordering::Acquire);
    if list.is_null() {
        return;
    }
    // SAFETY: a non-null pointer came from `Box::into_raw` in
    // `set_last_writes` and is never freed (replaced lists are leaked),
    // so it points to a live, never-mutated `LastWrites`.
    let list = unsafe { &*list };
    let mut all_written = true;
    for (path, bytes) in &list.writes {
        // SAFETY: `path` is a NUL-terminated C string that outlives the
        // call; the flags are plain constants.
        let fd = unsafe {
            libc::open(
                path.as_ptr(),
                libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            all_written = false;
            continue;
        }
        // SAFETY: `fd` is the descriptor just opened; the pointer and
        // length describe `bytes`, alive for the call.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        // SAFETY: closing the descriptor opened above, once.
        let closed = unsafe { libc::close(fd) };
        if usize::try_from(n).ok() != Some(bytes.len()) || closed != 0 {
            all_written = false;
        }
    }
    if !all_written {
        return;
    }
    for path in &list.removes {
        // SAFETY: `path` is a NUL-terminated C string alive for the call.
        let _ = unsafe { libc::unlink(path.as_ptr()) };
    }
}

extern "C" fn record(signo: libc::c_int) {
    // Only lock-free atomic operations and async-signal-safe calls.
    let _ = SIGNAL.compare_exchange(0, signo, Ordering::Relaxed, Ordering::Relaxed);
    let earlier = STOP_SIGNALS.fetch_add(1, Ordering::AcqRel);
    STOP.store(true, Ordering::Release);
    if earlier == 0 {
        return;
    }
    // The second stop signal: put back what the process changed outside
    // itself, then die of the signal's default action.
    write_last_writes();
    // SAFETY: `sigaction` is plain data; all-zero is a valid value whose
    // handler is SIG_DFL (0).
    let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
    dfl.sa_sigaction = libc::SIG_DFL;
    // SAFETY: `sigaction` and `raise` are async-signal-safe; `dfl` is
    // initialised and outlives the call. The raised signal is blocked while
    // this handler runs and is delivered, with the default action, when it
    // returns.
    unsafe {
        libc::sigaction(signo, &dfl, std::ptr::null_mut());
        libc::raise(signo);
    }
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP (the first stop
/// signal is recorded, the second ends the process; see the module's
/// notes). [`install_reload`] afterwards gives SIGHUP to reloading.
pub fn install() -> std::io::Result<()> {
    for signo in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: `sigaction` is plain data; all-zero is a valid value
        // (empty mask, no flags) that is filled in below.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = record as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: interrupted system calls resume instead of failing.
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: the handler only uses atomics and async-signal-safe calls;
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
        assert_eq!(Signal::Hangup.exit_code(), 129);
        install().expect("install handlers");
        assert_eq!(received(), None);
        // SAFETY: raising a signal whose handler was just installed; the
        // handler only stores to atomics.
        let rc = unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(rc, 0);
        assert!(stop_flag().load(Ordering::Acquire));
        assert_eq!(received(), Some(Signal::Terminate));
    }

    /// Set in the children that the tests below start: the file the child
    /// registers, and what the child does (`CHILD_MODE`).
    const CHILD_FILE: &str = "PKTSCHED_SIGNAL_CHILD_FILE";
    const CHILD_MODE: &str = "PKTSCHED_SIGNAL_CHILD_MODE";

    /// Runs only in such a child (a no-op otherwise): registers `FILE`
    /// (or, in mode `unwritable`, a file under a missing directory) to
    /// write and `FILE.gone` to remove, then raises SIGTERM twice; in mode
    /// `flag`, stores `true` to the stop flag first and raises it once.
    /// Exits 3 if no signal killed it. The SIGHUP modes exit as
    /// [`sighup_child`] says.
    #[test]
    fn second_signal_child() {
        let Some(file) = std::env::var_os(CHILD_FILE) else {
            return;
        };
        let mode = std::env::var(CHILD_MODE).unwrap_or_default();
        if let Some(code) = sighup_child(&mode) {
            std::process::exit(code);
        }
        install().expect("install");
        let file = PathBuf::from(file);
        let gone = file.with_extension("gone");
        std::fs::write(&gone, "").expect("file");
        let target = match mode.as_str() {
            "unwritable" => file.join("missing-dir").join("file"),
            _ => file,
        };
        set_last_writes(&[(target, "restored\n".to_string())], &[gone]);
        let raises = if mode == "flag" {
            stop_flag().store(true, Ordering::Release);
            1
        } else {
            2
        };
        for _ in 0..raises {
            // SAFETY: raising a signal whose handler was installed above.
            unsafe { libc::raise(libc::SIGTERM) };
        }
        // Not reached when a signal kills the process.
        std::process::exit(3);
    }

    /// The SIGHUP modes, each in a child of its own (handlers are per
    /// process, and a stop signal raised next to another test's would be
    /// a second one): `hangup` (the stop handlers only: SIGHUP stops, 4)
    /// and `reload` (then the reload handler: each SIGHUP is one reload
    /// and no stop, 6). Any other outcome exits 5; other modes `None`.
    fn sighup_child(mode: &str) -> Option<i32> {
        let ok = match mode {
            "hangup" => {
                install().expect("install");
                // SAFETY: raising a signal whose handler was installed above.
                unsafe { libc::raise(libc::SIGHUP) };
                stop_flag().load(Ordering::Acquire) && received() == Some(Signal::Hangup)
            }
            "reload" => {
                install().expect("install");
                install_reload().expect("install reload");
                let mut each = !take_reload();
                for _ in 0..2 {
                    // SAFETY: the SIGHUP handler was just installed; it
                    // only stores to an atomic.
                    each &= unsafe { libc::raise(libc::SIGHUP) } == 0;
                    each &= take_reload() && !take_reload();
                }
                each && !stop_flag().load(Ordering::Acquire)
            }
            _ => return None,
        };
        Some(match (mode, ok) {
            ("hangup", true) => 4,
            (_, true) => 6,
            _ => 5,
        })
    }

    /// Runs [`second_signal_child`] in `mode` on a fresh file holding
    /// "changed"; its status, the file's text, and whether `.gone` is left.
    fn run_child(mode: &str) -> (std::process::ExitStatus, String, bool) {
        let file = std::env::temp_dir().join(format!("pktsched-sig-{}-{mode}", std::process::id()));
        std::fs::write(&file, "changed\n").expect("file");
        let status = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args([
                "--exact",
                "signal::tests::second_signal_child",
                "--nocapture",
            ])
            .env(CHILD_FILE, &file)
            .env(CHILD_MODE, mode)
            .status()
            .expect("child");
        let written = std::fs::read_to_string(&file).expect("read");
        let gone = file.with_extension("gone");
        let left = gone.exists();
        let _ = std::fs::remove_file(&file);
        let _ = std::fs::remove_file(&gone);
        (status, written, left)
    }

    #[test]
    fn a_second_signal_writes_the_last_files_and_kills() {
        use std::os::unix::process::ExitStatusExt;
        let (status, written, left) = run_child("twice");
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        assert_eq!(written, "restored\n");
        assert!(!left, "removed once every write succeeded");
    }

    #[test]
    fn a_failed_last_write_keeps_the_files_to_remove() {
        use std::os::unix::process::ExitStatusExt;
        let (status, written, left) = run_child("unwritable");
        assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
        assert_eq!(written, "changed\n");
        assert!(left, "kept: a write failed");
    }

    #[test]
    fn the_stop_flag_set_elsewhere_does_not_make_a_first_signal_fatal() {
        let (status, _, left) = run_child("flag");
        assert_eq!(status.code(), Some(3), "{status:?}");
        assert!(left, "nothing written or removed by a first signal");
    }

    #[test]
    fn sighup_stops_a_process_without_a_reload_handler() {
        let (status, _, _) = run_child("hangup");
        assert_eq!(status.code(), Some(4), "{status:?}");
    }

    #[test]
    fn sighup_requests_one_reload_each_time_once_the_reload_handler_is_in() {
        let (status, _, _) = run_child("reload");
        assert_eq!(status.code(), Some(6), "{status:?}");
    }
}
