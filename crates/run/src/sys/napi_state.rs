//! The state file of a busy-polling run ([`super::napi`]): the device's
//! NAPI settings as they were before the run changed them, held locked
//! (`flock`, released by the kernel when the process dies however it
//! dies) so the next run can tell a killed run's leftover from a live run.
//!
//! Format, one item a line: `pid N`, `address MAC` (the device's, so a
//! file left by a namespace that is gone is not applied to another
//! device whose namespace reuses the inode), then `FILE VALUE` for each
//! sysfs file (`napi_defer_hard_irqs`, `gro_flush_timeout`) with its
//! previous value, a whole number.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::napi::{ApplyError, BUSY_POLL_DEFER_HARD_IRQS, BUSY_POLL_GRO_FLUSH_NS, FILES};
/// Largest state file read.
const MAX_STATE_BYTES: u64 = 4096;

/// The state file's name for `device` in this thread's network namespace
/// (its inode: the same name in two namespaces is two devices).
pub(super) fn file_name(device: &str) -> String {
    let netns = std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino());
    format!("napi-{netns}-{device}.state")
}

/// What locking an open state file found.
#[derive(Debug, PartialEq, Eq)]
enum Lock {
    /// Locked, and still the file at its path.
    Held,
    /// Another live run holds it.
    Busy,
    /// Locked, but the path now names another file or none (a run removed
    /// it, and maybe recorded a new one, between the open and the lock).
    Moved,
}

/// Locks `file`, opened from `path`, and checks (device, inode) of the
/// locked file against the file at `path`. Every run removes a state file
/// only while it holds its lock, so a file found `Held` stays at its path
/// until this process lets it go.
/// Tries at taking a state file's lock before it counts as held (5 ms apart).
const LOCK_TRIES: u32 = 10;

fn lock_at(file: &File, path: &Path) -> Result<Lock, String> {
    let shown = path.display();
    // Another run's `refuse_if_held` holds a shared lock for a moment
    // only; a live run holds its lock for good: a few tries over ~50 ms
    // tell the two apart.
    let mut tries = 0;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) if tries < LOCK_TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(TryLockError::WouldBlock) => return Ok(Lock::Busy),
            Err(TryLockError::Error(e)) => {
                return Err(format!("cannot lock the state file {shown}: {e}"));
            }
        }
    }
    let held = file
        .metadata()
        .map_err(|e| format!("cannot stat the locked state file {shown}: {e}"))?;
    match std::fs::metadata(path) {
        Ok(m) if m.dev() == held.dev() && m.ino() == held.ino() => Ok(Lock::Held),
        Ok(_) => Ok(Lock::Moved),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Lock::Moved),
        Err(e) => Err(format!("cannot stat the state file {shown}: {e}")),
    }
}

/// The refusal when another live run holds the state file at `path`.
fn busy(device: &str, path: &Path) -> ApplyError {
    ApplyError::Refused(format!(
        "another pktsched busy-polls {device} in this network namespace (it holds {}): \
         allowed one busy-polling run per device",
        path.display()
    ))
}

/// Refuses when a live run holds `device`'s state file under `state_dir`:
/// checked before the devices' sockets are opened, so a second
/// busy-polling run is told which process holds the device (its pid)
/// rather than that its AF_XDP queue is taken. The shared lock taken to
/// look is released at once; a file nobody holds (a killed run's
/// leftover) is left for `put_back_leftover`.
pub fn refuse_if_held(state_dir: &Path, device: &str) -> Result<(), String> {
    let path = state_dir.join(file_name(device));
    let Ok(file) = File::open(&path) else {
        // No file (or none readable): nobody to name; the apply that
        // follows says what is wrong with it, if anything.
        return Ok(());
    };
    match file.try_lock_shared() {
        Err(TryLockError::WouldBlock) => {}
        Ok(()) | Err(TryLockError::Error(_)) => return Ok(()),
    }
    let mut text = String::new();
    let _ = (&file).take(MAX_STATE_BYTES).read_to_string(&mut text);
    let holder = parse(&text).map_or_else(
        |_| "another pktsched".to_string(),
        |s| format!("another pktsched (pid {})", s.pid),
    );
    Err(format!(
        "busy polling {device}: {holder} busy-polls {device} in this network namespace (it \
         holds {} and the device's AF_XDP queues): allowed one busy-polling run per device; \
         stop that run first",
        path.display()
    ))
}

/// Opens `path` with `options` and locks it: `None` when there is no file
/// (and `options` does not create one). A file removed or replaced between
/// the open and the lock is opened again, once; a second time, or a file
/// another run holds, is a refusal.
fn open_locked(
    path: &Path,
    options: &OpenOptions,
    device: &str,
) -> Result<Option<File>, ApplyError> {
    let shown = path.display();
    for _ in 0..2 {
        let file = match options.open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(ApplyError::NotWritten(format!(
                    "cannot open the state file {shown}: {e}"
                )));
            }
        };
        match lock_at(&file, path)? {
            Lock::Held => return Ok(Some(file)),
            Lock::Busy => return Err(busy(device, path)),
            // Dropping `file` closes it and releases its lock.
            Lock::Moved => {}
        }
    }
    Err(ApplyError::Refused(format!(
        "the state file {shown} was removed or replaced twice while it was being locked: \
         another pktsched is starting or stopping busy polling on {device}; try again"
    )))
}

/// Creates `path` (and its directory, mode 0700), locks it and writes the
/// previous values `old` (sysfs path, value); the open file holds the lock.
/// A file another live run holds is a refusal.
pub(super) fn record(
    path: &Path,
    old: &[(PathBuf, String)],
    address: &str,
    device: &str,
) -> Result<File, ApplyError> {
    let shown = path.display();
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut options = OpenOptions::new();
    options.write(true).create(true).truncate(false).mode(0o600);
    let mut file = open_locked(path, &options, device)?
        .ok_or_else(|| format!("cannot write the state file {shown}: its directory is gone"))?;
    let mut text = format!("pid {}\naddress {address}\n", std::process::id());
    for (p, v) in old {
        let name = p
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        text.push_str(&format!("{name} {v}\n"));
    }
    file.set_len(0)
        .and_then(|()| file.write_all(text.as_bytes()))
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write the state file {shown}: {e}"))?;
    Ok(file)
}

/// A state file's contents.
#[derive(Debug, PartialEq, Eq)]
struct State {
    pid: u32,
    /// The device's MAC address when the file was written (empty: unknown).
    address: String,
    /// (sysfs file, its previous value).
    values: Vec<(&'static str, String)>,
}

/// A state file's text read, or why not.
fn parse(text: &str) -> Result<State, String> {
    let mut pid = None;
    let mut address = String::new();
    let mut values = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (key, value) = line
            .split_once(' ')
            .ok_or_else(|| format!("line {line:?} is not `NAME VALUE`"))?;
        if key == "address" {
            let mac =
                value.len() <= 64 && value.bytes().all(|b| b.is_ascii_hexdigit() || b == b':');
            if !mac {
                return Err(format!("address {value:?} is not a MAC address"));
            }
            address = value.to_string();
            continue;
        }
        let number =
            |v: &str| v.len() <= 20 && !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit());
        if !number(value) {
            return Err(format!("{key} = {value:?} is not a whole number"));
        }
        if key == "pid" {
            pid = value.parse().ok();
        } else if let Some(f) = FILES.iter().find(|f| **f == key) {
            values.push((*f, value.to_string()));
        } else {
            return Err(format!(
                "unknown name {key:?}: allowed pid, address, {}",
                FILES.join(", ")
            ));
        }
    }
    Ok(State {
        pid: pid.ok_or("no `pid` line")?,
        address,
        values,
    })
}

/// If `path` is a killed run's state file (it exists and nobody holds its
/// lock), writes its values back under `device_dir` and removes it; the
/// note says what was put back. A file another live run holds is a
/// refusal.
pub(super) fn put_back_leftover(
    path: &Path,
    device_dir: &Path,
    device: &str,
) -> Result<Option<String>, ApplyError> {
    let shown = path.display();
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    let Some(mut file) = open_locked(path, &options, device)? else {
        return Ok(None);
    };
    let mut text = String::new();
    (&mut file)
        .take(MAX_STATE_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the state file {shown}: {e}"))?;
    let here = std::fs::read_to_string(device_dir.join("address")).unwrap_or_default();
    let note = match parse(&text) {
        Ok(state) if !state.address.is_empty() && state.address != here.trim() => format!(
            "{device}: the state file {shown} of a busy-polling run (pid {}) is for another \
             device (address {}, {device} here is {}; its namespace is gone); removed without \
             writing anything",
            state.pid,
            state.address,
            here.trim()
        ),
        Ok(state) => {
            let mut put = Vec::new();
            for (f, v) in &state.values {
                let target = device_dir.join(f);
                std::fs::write(&target, v).map_err(|e| {
                    format!(
                        "cannot write {v} to {} from the state file {shown} of a killed \
                         busy-polling run: {e}; the file is kept so the next run tries again \
                         (delete it to leave the device's settings as they are)",
                        target.display()
                    )
                })?;
                put.push(format!("{f} {v}"));
            }
            format!(
                "{device}: a busy-polling run (pid {}) ended without putting back the \
                 device's settings (killed?); put back from {shown}: {}",
                state.pid,
                put.join(", ")
            )
        }
        Err(why) => format!(
            "{device}: the state file {shown} is unreadable ({why}); removed, the device's \
             settings left as they are (busy polling sets napi_defer_hard_irqs \
             {BUSY_POLL_DEFER_HARD_IRQS}, gro_flush_timeout {BUSY_POLL_GRO_FLUSH_NS})"
        ),
    };
    std::fs::remove_file(path).map_err(|e| format!("cannot remove {shown}: {e}"))?;
    Ok(Some(note))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_text_is_read_strictly() {
        let state = parse(
            "pid 42\naddress 02:aa:00:00:00:01\nnapi_defer_hard_irqs 0\ngro_flush_timeout 7\n",
        )
        .expect("ok");
        assert_eq!(
            state,
            State {
                pid: 42,
                address: "02:aa:00:00:00:01".to_string(),
                values: vec![
                    ("napi_defer_hard_irqs", "0".to_string()),
                    ("gro_flush_timeout", "7".to_string())
                ],
            }
        );
        for (bad, says) in [
            ("napi_defer_hard_irqs 0\n", "no `pid` line"),
            ("pid 1\nifalias 0\n", "unknown name \"ifalias\""),
            ("pid 1\ngro_flush_timeout -1\n", "not a whole number"),
            ("pid 1\ngro_flush_timeout 1; rm\n", "not a whole number"),
            ("\u{0}\u{1}garbage", "not `NAME VALUE`"),
            ("pid 1\naddress ../x\n", "not a MAC address"),
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pktsched-napi-state-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn a_state_file_removed_or_replaced_before_the_lock_is_not_taken() {
        let dir = scratch("moved");
        let path = dir.join("napi-1-fw0.state");
        std::fs::write(&path, "pid 1\nnapi_defer_hard_irqs 0\n").expect("leftover");
        // Run B opens the leftover; run A then puts it back, removes it and
        // records its own, which it holds.
        let stale = File::open(&path).expect("open");
        std::fs::remove_file(&path).expect("rm");
        let a = record(&path, &[], "", "fw0").expect("A records");
        assert_eq!(lock_at(&stale, &path), Ok(Lock::Moved));
        drop(stale);
        // B, from the start: refused, and A's file left in place.
        for e in [
            put_back_leftover(&path, &dir, "fw0").expect_err("held by A"),
            record(&path, &[], "", "fw0").expect_err("held by A"),
        ] {
            assert!(
                matches!(&e, ApplyError::Refused(why) if why.contains("another pktsched busy-polls fw0")),
                "{e:?}"
            );
        }
        assert!(path.exists(), "A's state file kept");
        // Removed with nothing in its place: not taken either.
        let stale = File::open(&path).expect("open");
        std::fs::remove_file(&path).expect("rm");
        drop(a);
        assert_eq!(lock_at(&stale, &path), Ok(Lock::Moved));
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn a_leftover_that_cannot_be_written_back_is_kept_and_named() {
        let dir = scratch("kept");
        let path = dir.join("napi-1-fw0.state");
        std::fs::write(&path, "pid 1\nnapi_defer_hard_irqs 0\n").expect("leftover");
        // The device's sysfs directory is missing: the write fails.
        let e = put_back_leftover(&path, &dir.join("fw0"), "fw0").expect_err("no device");
        let why = e.to_string();
        assert!(
            matches!(e, ApplyError::NotWritten(_))
                && why.contains("napi_defer_hard_irqs")
                && why.contains("the file is kept")
                && why.contains("delete it"),
            "{why}"
        );
        assert!(path.exists(), "kept for the next run");
        std::fs::remove_dir_all(dir).expect("cleanup");
    }

    #[test]
    fn a_held_state_file_is_named_with_its_pid_before_anything_is_opened() {
        let dir = scratch("held");
        assert_eq!(refuse_if_held(&dir, "fw0"), Ok(()), "no file");
        let path = dir.join(file_name("fw0"));
        std::fs::write(&path, "pid 1\nnapi_defer_hard_irqs 0\n").expect("leftover");
        assert_eq!(
            refuse_if_held(&dir, "fw0"),
            Ok(()),
            "a leftover nobody holds is the apply's to put back"
        );
        assert!(path.exists(), "the leftover is left alone");
        std::fs::remove_file(&path).expect("rm");
        let live = record(&path, &[], "", "fw0").expect("a live run records");
        let e = refuse_if_held(&dir, "fw0").expect_err("held");
        assert!(
            e.contains(&format!("another pktsched (pid {})", std::process::id()))
                && e.contains("busy-polls fw0")
                && e.contains(&path.display().to_string())
                && e.contains("allowed one busy-polling run per device"),
            "{e}"
        );
        drop(live);
        assert_eq!(refuse_if_held(&dir, "fw0"), Ok(()), "released");
        std::fs::remove_dir_all(dir).expect("cleanup");
    }
}
