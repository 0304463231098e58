//! The ingress device's NAPI settings that go with preferred busy polling
//! (the kernel's Documentation/networking/napi.rst): `napi_defer_hard_irqs`
//! (how many empty polls the device's interrupts stay masked for) and
//! `gro_flush_timeout` (the timer that re-arms the NAPI context when no
//! busy poll comes). Written through sysfs in the process's own network
//! namespace (`/sys/class/net/DEV/...`, as `ip netns exec` mounts it), no
//! shell-out; the previous values are written back when the settings are
//! dropped (at exit, also on an error path). A sysfs that shows another
//! namespace (a thread that entered the namespace with `setns` keeps the
//! sysfs it had: its `DEV/ifindex` is missing or differs from the
//! device's index in the thread's namespace) is not written:
//! [`NapiSettings::apply`] says so and the caller goes on without.
//!
//! A process that dies without its drop running still puts them back: a
//! second SIGINT/SIGTERM writes them from the signal handler
//! ([`pktsched_runtime::signal::set_last_writes`]) before the process
//! dies, and for a `kill -9` the previous values are kept in a state file
//! (`/run/pktsched/napi-NETNS-DEV.state`, [`STATE_DIR`]) that the running
//! process holds locked (`flock`). The next run on the device finds the
//! file unlocked (its owner is gone), writes the values back, says so and
//! removes it; a locked file means another live run busy-polls the device
//! and the run is refused ([`ApplyError::Refused`]).

use std::path::{Path, PathBuf};

/// `napi_defer_hard_irqs` while busy polling.
pub const BUSY_POLL_DEFER_HARD_IRQS: u32 = 2;
/// `gro_flush_timeout` (ns) while busy polling: if the forwarder stops
/// polling, the kernel's own processing resumes after at most this long.
pub const BUSY_POLL_GRO_FLUSH_NS: u64 = 200_000;

/// Where busy-polling runs keep the state files of the settings they
/// changed.
pub const STATE_DIR: &str = "/run/pktsched";

/// The sysfs files written, in order (and the only names a state file may
/// hold).
pub(super) const FILES: [&str; 2] = ["napi_defer_hard_irqs", "gro_flush_timeout"];

/// Why [`NapiSettings::apply`] left the device's settings as they were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// Another live pktsched busy-polls the device (it holds the state
    /// file): one busy-polling run per device, this one is refused.
    Refused(String),
    /// The settings could not be written (why); busy polling may go on
    /// without them.
    NotWritten(String),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Refused(why) | ApplyError::NotWritten(why) => f.write_str(why),
        }
    }
}

impl From<String> for ApplyError {
    fn from(why: String) -> Self {
        ApplyError::NotWritten(why)
    }
}

/// Settings written to a device, restored on drop.
#[derive(Debug)]
pub struct NapiSettings {
    /// (file, the value it had), in the order written.
    saved: Vec<(PathBuf, String)>,
    /// The state file, held locked while the settings are in place.
    state: Option<(PathBuf, std::fs::File)>,
    /// What was found and done besides (a leftover of a killed run put
    /// back, a state file that could not be written), for the log.
    pub notes: Vec<String>,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_NET_ADMIN)",
            _ => "",
        };
        format!("cannot write {value} to {}: {e}{hint}", path.display())
    })
}

impl NapiSettings {
    /// Writes the busy-poll settings to `device` under `sys_class_net`
    /// (normally `/sys/class/net`), if its `ifindex` there is
    /// `index_here` (the device's index in this thread's namespace; `None`
    /// skips the check); the error names the file and why. With
    /// `state_dir` (normally [`STATE_DIR`]) a leftover of a killed run is
    /// put back first and the previous values are recorded there; a state
    /// file another live run holds is [`ApplyError::Refused`].
    pub fn apply(
        sys_class_net: &Path,
        device: &str,
        index_here: Option<i32>,
        state_dir: Option<&Path>,
    ) -> Result<NapiSettings, ApplyError> {
        if device.is_empty() || device.contains('/') || device == "." || device == ".." {
            return Err(ApplyError::NotWritten(format!(
                "device {device:?}: not an interface name (no '/', not empty)"
            )));
        }
        let dir = sys_class_net.join(device);
        if let Some(index) = index_here {
            let seen = std::fs::read_to_string(dir.join("ifindex")).unwrap_or_default();
            if seen.trim() != index.to_string() {
                return Err(ApplyError::NotWritten(format!(
                    "{} shows another network namespace (ifindex {:?}, {device} here is {index}); \
                     run under `ip netns exec`, which mounts the namespace's own sysfs",
                    dir.display(),
                    seen.trim()
                )));
            }
        }
        let mut settings = NapiSettings {
            saved: Vec::new(),
            state: None,
            notes: Vec::new(),
        };
        let state_path = state_dir.map(|d| d.join(super::napi_state::file_name(device)));
        if let Some(path) = &state_path
            && let Some(note) = super::napi_state::put_back_leftover(path, &dir, device)?
        {
            settings.notes.push(note);
        }
        let mut old = Vec::new();
        for file in FILES {
            let path = dir.join(file);
            let v = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            old.push((path, v.trim().to_string()));
        }
        if let Some(path) = state_path {
            let address = std::fs::read_to_string(dir.join("address")).unwrap_or_default();
            match super::napi_state::record(&path, &old, address.trim(), device) {
                Ok(file) => settings.state = Some((path, file)),
                Err(refused @ ApplyError::Refused(_)) => return Err(refused),
                Err(ApplyError::NotWritten(e)) => settings.notes.push(format!(
                    "{e}; a run killed with SIGKILL would leave the busy-poll settings in place"
                )),
            }
        }
        for ((path, was), value) in old.into_iter().zip([
            BUSY_POLL_DEFER_HARD_IRQS.to_string(),
            BUSY_POLL_GRO_FLUSH_NS.to_string(),
        ]) {
            // On failure, `settings` drops and restores what was written.
            write(&path, &value)?;
            settings.saved.push((path, was));
            let state: Vec<PathBuf> = settings.state.iter().map(|(p, _)| p.clone()).collect();
            pktsched_runtime::signal::set_last_writes(&settings.saved, &state);
        }
        Ok(settings)
    }

    /// Writes the previous values back; the errors, if any, joined.
    pub fn restore(mut self) -> Result<(), String> {
        self.restore_all()
    }

    fn restore_all(&mut self) -> Result<(), String> {
        let mut errors: Vec<String> = self
            .saved
            .drain(..)
            .rev()
            .filter_map(|(path, old)| write(&path, &old).err())
            .collect();
        pktsched_runtime::signal::clear_last_writes();
        // Removed only once the values are back (else the next run puts
        // them back); the lock goes with the file.
        if let Some((path, _file)) = self.state.take()
            && errors.is_empty()
            && let Err(e) = std::fs::remove_file(&path)
        {
            errors.push(format!("cannot remove {}: {e}", path.display()));
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }
}

impl Drop for NapiSettings {
    fn drop(&mut self) {
        if let Err(e) = self.restore_all() {
            eprintln!("pktsched: restoring the busy-poll device settings: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_device(values: [&str; 2]) -> (PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!(
            "pktsched-napi-{}-{}",
            std::process::id(),
            crate::sys::monotonic_ns()
        ));
        let dev = root.join("fw0");
        std::fs::create_dir_all(&dev).expect("dir");
        std::fs::write(dev.join("napi_defer_hard_irqs"), values[0]).expect("file");
        std::fs::write(dev.join("gro_flush_timeout"), values[1]).expect("file");
        std::fs::write(dev.join("ifindex"), "7\n").expect("file");
        std::fs::write(dev.join("address"), "02:aa:00:00:00:07\n").expect("file");
        (root, dev)
    }

    fn read(dev: &Path, f: &str) -> String {
        std::fs::read_to_string(dev.join(f)).expect("read")
    }

    #[test]
    fn settings_are_written_and_the_old_values_come_back() {
        let (root, dev) = fake_device(["0\n", "0\n"]);
        let s = NapiSettings::apply(&root, "fw0", None, None).expect("apply");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "2");
        assert_eq!(read(&dev, "gro_flush_timeout"), "200000");
        s.restore().expect("restore");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "0");
        assert_eq!(read(&dev, "gro_flush_timeout"), "0");
        // Dropped without an explicit restore: restored too.
        drop(NapiSettings::apply(&root, "fw0", None, None).expect("apply"));
        assert_eq!(read(&dev, "gro_flush_timeout"), "0");
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn a_missing_device_or_a_bad_name_is_an_error_naming_it() {
        let (root, dev) = fake_device(["1", "5"]);
        let e = NapiSettings::apply(&root, "fw9", None, None)
            .expect_err("no such device")
            .to_string();
        assert!(e.contains("fw9/napi_defer_hard_irqs"), "{e}");
        let e = NapiSettings::apply(&root, "../x", None, None)
            .expect_err("bad name")
            .to_string();
        assert!(
            e.contains("\"../x\"") && e.contains("not an interface"),
            "{e}"
        );
        // Another namespace's sysfs (the index differs): nothing written.
        let e = NapiSettings::apply(&root, "fw0", Some(8), None)
            .expect_err("other ns")
            .to_string();
        assert!(
            e.contains("another network namespace") && e.contains("\"7\""),
            "{e}"
        );
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "1");
        drop(NapiSettings::apply(&root, "fw0", Some(7), None).expect("same index"));
        // Half written (the second file missing): the first is put back.
        std::fs::remove_file(dev.join("gro_flush_timeout")).expect("rm");
        let e = NapiSettings::apply(&root, "fw0", None, None)
            .expect_err("half")
            .to_string();
        assert!(e.contains("gro_flush_timeout"), "{e}");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "1");
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn a_killed_runs_leftover_is_put_back_and_a_live_run_is_refused() {
        let (root, dev) = fake_device(["0\n", "0\n"]);
        let state = root.join("state");
        // A live run holds its state file: a second run is refused.
        let first = NapiSettings::apply(&root, "fw0", None, Some(&state)).expect("apply");
        assert!(first.notes.is_empty(), "{:?}", first.notes);
        let e = NapiSettings::apply(&root, "fw0", None, Some(&state)).expect_err("held");
        assert!(
            matches!(&e, ApplyError::Refused(why) if why.contains("another pktsched busy-polls fw0")),
            "{e:?}"
        );
        // Killed: the settings stay and the lock goes (the file's open
        // description closed), as SIGKILL leaves them.
        let mut first = first;
        first.saved.clear();
        let held = first.state.take();
        drop(first);
        let (path, file) = held.expect("a state file");
        drop(file);
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "2");
        let text = std::fs::read_to_string(&path).expect("state");
        assert!(
            text.contains("napi_defer_hard_irqs 0\ngro_flush_timeout 0"),
            "{text}"
        );
        // The next run puts the old values back first, says so, and
        // restores those (not its predecessor's) at its end.
        let next = NapiSettings::apply(&root, "fw0", None, Some(&state)).expect("apply");
        assert!(
            next.notes.len() == 1
                && next.notes[0].contains("ended without putting back")
                && next.notes[0].contains("napi_defer_hard_irqs 0, gro_flush_timeout 0"),
            "{:?}",
            next.notes
        );
        assert_eq!(read(&dev, "gro_flush_timeout"), "200000");
        next.restore().expect("restore");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "0");
        assert_eq!(read(&dev, "gro_flush_timeout"), "0");
        assert!(!path.exists(), "removed at a clean end");
        // A file another device left (a namespace that is gone, its inode
        // reused): named, removed, nothing written.
        std::fs::write(
            &path,
            "pid 9\naddress 02:bb:00:00:00:09\nnapi_defer_hard_irqs 5\ngro_flush_timeout 5\n",
        )
        .expect("stale");
        let s = NapiSettings::apply(&root, "fw0", None, Some(&state)).expect("apply");
        assert!(
            s.notes[0].contains("is for another device (address 02:bb:00:00:00:09"),
            "{:?}",
            s.notes
        );
        drop(s);
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "0");
        // Garbage in the state file: named, removed, nothing written.
        std::fs::write(&path, "\u{0}\u{1}binary").expect("garbage");
        let s = NapiSettings::apply(&root, "fw0", None, Some(&state)).expect("apply");
        assert!(s.notes[0].contains("is unreadable"), "{:?}", s.notes);
        drop(s);
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "0");
        std::fs::remove_dir_all(root).expect("cleanup");
    }
}
