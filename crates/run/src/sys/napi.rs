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

use std::path::{Path, PathBuf};

/// `napi_defer_hard_irqs` while busy polling.
pub const BUSY_POLL_DEFER_HARD_IRQS: u32 = 2;
/// `gro_flush_timeout` (ns) while busy polling: if the forwarder stops
/// polling, the kernel's own processing resumes after at most this long.
pub const BUSY_POLL_GRO_FLUSH_NS: u64 = 200_000;

/// Settings written to a device, restored on drop.
#[derive(Debug)]
pub struct NapiSettings {
    /// (file, the value it had), in the order written.
    saved: Vec<(PathBuf, String)>,
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
    /// skips the check); the error names the file and why.
    pub fn apply(
        sys_class_net: &Path,
        device: &str,
        index_here: Option<i32>,
    ) -> Result<NapiSettings, String> {
        if device.is_empty() || device.contains('/') || device == "." || device == ".." {
            return Err(format!(
                "device {device:?}: not an interface name (no '/', not empty)"
            ));
        }
        let dir = sys_class_net.join(device);
        if let Some(index) = index_here {
            let seen = std::fs::read_to_string(dir.join("ifindex")).unwrap_or_default();
            if seen.trim() != index.to_string() {
                return Err(format!(
                    "{} shows another network namespace (ifindex {:?}, {device} here is {index}); \
                     run under `ip netns exec`, which mounts the namespace's own sysfs",
                    dir.display(),
                    seen.trim()
                ));
            }
        }
        let mut settings = NapiSettings { saved: Vec::new() };
        for (file, value) in [
            (
                "napi_defer_hard_irqs",
                BUSY_POLL_DEFER_HARD_IRQS.to_string(),
            ),
            ("gro_flush_timeout", BUSY_POLL_GRO_FLUSH_NS.to_string()),
        ] {
            let path = dir.join(file);
            let old = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            // On failure, `settings` drops and restores what was written.
            write(&path, &value)?;
            settings.saved.push((path, old.trim().to_string()));
        }
        Ok(settings)
    }

    /// Writes the previous values back; the errors, if any, joined.
    pub fn restore(mut self) -> Result<(), String> {
        self.restore_all()
    }

    fn restore_all(&mut self) -> Result<(), String> {
        let errors: Vec<String> = self
            .saved
            .drain(..)
            .rev()
            .filter_map(|(path, old)| write(&path, &old).err())
            .collect();
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
        (root, dev)
    }

    fn read(dev: &Path, f: &str) -> String {
        std::fs::read_to_string(dev.join(f)).expect("read")
    }

    #[test]
    fn settings_are_written_and_the_old_values_come_back() {
        let (root, dev) = fake_device(["0\n", "0\n"]);
        let s = NapiSettings::apply(&root, "fw0", None).expect("apply");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "2");
        assert_eq!(read(&dev, "gro_flush_timeout"), "200000");
        s.restore().expect("restore");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "0");
        assert_eq!(read(&dev, "gro_flush_timeout"), "0");
        // Dropped without an explicit restore: restored too.
        drop(NapiSettings::apply(&root, "fw0", None).expect("apply"));
        assert_eq!(read(&dev, "gro_flush_timeout"), "0");
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn a_missing_device_or_a_bad_name_is_an_error_naming_it() {
        let (root, dev) = fake_device(["1", "5"]);
        let e = NapiSettings::apply(&root, "fw9", None).expect_err("no such device");
        assert!(e.contains("fw9/napi_defer_hard_irqs"), "{e}");
        let e = NapiSettings::apply(&root, "../x", None).expect_err("bad name");
        assert!(
            e.contains("\"../x\"") && e.contains("not an interface"),
            "{e}"
        );
        // Another namespace's sysfs (the index differs): nothing written.
        let e = NapiSettings::apply(&root, "fw0", Some(8)).expect_err("other ns");
        assert!(
            e.contains("another network namespace") && e.contains("\"7\""),
            "{e}"
        );
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "1");
        drop(NapiSettings::apply(&root, "fw0", Some(7)).expect("same index"));
        // Half written (the second file missing): the first is put back.
        std::fs::remove_file(dev.join("gro_flush_timeout")).expect("rm");
        let e = NapiSettings::apply(&root, "fw0", None).expect_err("half");
        assert!(e.contains("gro_flush_timeout"), "{e}");
        assert_eq!(read(&dev, "napi_defer_hard_irqs"), "1");
        std::fs::remove_dir_all(root).expect("cleanup");
    }
}
