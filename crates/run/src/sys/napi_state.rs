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

use super::napi::{BUSY_POLL_DEFER_HARD_IRQS, BUSY_POLL_GRO_FLUSH_NS};

/// Files a state file may name (nothing else is ever written back).
const FILES: [&str; 2] = ["napi_defer_hard_irqs", "gro_flush_timeout"];
/// Largest state file read.
const MAX_STATE_BYTES: u64 = 4096;

/// The state file's name for `device` in this thread's network namespace
/// (its inode: the same name in two namespaces is two devices).
pub(super) fn file_name(device: &str) -> String {
    let netns = std::fs::metadata("/proc/thread-self/ns/net").map_or(0, |m| m.ino());
    format!("napi-{netns}-{device}.state")
}

/// Creates `path` (and its directory, mode 0700), locks it and writes the
/// previous values `old` (sysfs path, value); the open file holds the lock.
pub(super) fn record(
    path: &Path,
    old: &[(PathBuf, String)],
    address: &str,
) -> Result<File, String> {
    let shown = path.display();
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write the state file {shown}: {e}"))?;
    file.try_lock()
        .map_err(|e| format!("cannot lock the state file {shown}: {e}"))?;
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
/// note says what was put back. A file another live run holds is an error.
pub(super) fn put_back_leftover(
    path: &Path,
    device_dir: &Path,
    device: &str,
) -> Result<Option<String>, String> {
    let shown = path.display();
    let mut file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open the state file {shown}: {e}")),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(format!(
                "another pktsched busy-polls {device} in this network namespace (it holds \
                 {shown}): allowed one busy-polling run per device"
            ));
        }
        Err(TryLockError::Error(e)) => {
            return Err(format!("cannot lock the state file {shown}: {e}"));
        }
    }
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
                std::fs::write(&target, v)
                    .map_err(|e| format!("cannot write {v} to {}: {e}", target.display()))?;
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
}
