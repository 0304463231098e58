//! The ingress's NAPI as a kernel thread on the forwarder's core
//! (threaded NAPI, the kernel's Documentation/networking/napi.rst).
//!
//! On veth with an XDP program, the ingress's receive work (the program,
//! the copy into the AF_XDP ring) otherwise runs in softirq on whichever
//! core transmitted the frame: for a generator on another core, that
//! core. Writing 1 to the device's sysfs `threaded` moves it into one
//! `napi/DEV-ID` kernel thread per NAPI context; [`ThreadedNapi::apply`]
//! then pins that thread to the forwarder's CPU and, under a real-time
//! forwarder (`SCHED_FIFO` N), gives it N + 1, so it preempts the
//! forwarder as a softirq would (veth queues only 256 frames for the
//! ingress) instead of waiting for its pass. The previous value goes back
//! when the settings are dropped (at exit, also on an error path), which
//! ends the thread.
//!
//! Kernel threads live in no network namespace and other namespaces may
//! have a device of the same name: the threads placed are those named
//! `napi/DEV-` that appear once `threaded` is switched on, not those that
//! were there before. A device already threaded is left as it is (its
//! threads are someone else's to place).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::config::ThreadSched;

/// How long [`ThreadedNapi::apply`] waits for the kernel to start the
/// device's NAPI thread.
const THREAD_WAIT: Duration = Duration::from_secs(1);

/// `threaded` switched on for a device, restored on drop.
#[derive(Debug)]
pub struct ThreadedNapi {
    /// The sysfs file and the value it had (`None`: nothing written).
    saved: Option<(PathBuf, String)>,
    /// The NAPI threads started for the device, placed.
    pub threads: Vec<i32>,
    /// What was found and done besides, for the log.
    pub notes: Vec<String>,
}

/// `/proc`'s thread ids whose name starts with `napi/DEV-` (the kernel's
/// name, cut at 15 bytes like every task name).
pub fn napi_threads(proc_root: &Path, device: &str) -> Vec<i32> {
    let prefix = format!("napi/{device}-");
    let want = &prefix.as_bytes()[..prefix.len().min(15)];
    let Ok(dir) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut found: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(proc_root.join(pid.to_string()).join("comm"))
                .is_ok_and(|c| c.starts_with(want))
        })
        .collect();
    found.sort_unstable();
    found
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| {
        let hint = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => " (needs CAP_NET_ADMIN)",
            Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                " (the device has no NAPI context: on veth, attach the XDP program first)"
            }
            _ => "",
        };
        format!("cannot write {value} to {}: {e}{hint}", path.display())
    })
}

/// Pins thread `tid` to `cpu` and gives it `SCHED_FIFO` `prio` (if any).
pub fn place_thread(tid: i32, cpu: Option<u32>, prio: Option<u32>) -> Result<(), String> {
    if let Some(cpu) = cpu {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "CPU {cpu} is out of range: allowed 0..{}",
                libc::CPU_SETSIZE
            ));
        }
        // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: CPU_SET writes one bit of a valid set; `cpu` is below
        // CPU_SETSIZE (checked above).
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        // SAFETY: `set` is a valid cpu_set_t of the size passed; `tid` is
        // a thread id (a wrong one fails with ESRCH, nothing else).
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!(
                "NAPI thread {tid}: CPU {cpu}: sched_setaffinity: {e}"
            ));
        }
    }
    if let Some(prio) = prio {
        let param = libc::sched_param {
            sched_priority: prio as libc::c_int,
        };
        // SAFETY: `param` is a valid sched_param for the call.
        let rc = unsafe { libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!(
                "NAPI thread {tid}: SCHED_FIFO {prio}: sched_setscheduler: {e}"
            ));
        }
    }
    Ok(())
}

impl ThreadedNapi {
    /// Switches `device`'s NAPI to a kernel thread (its `threaded` under
    /// `sys_class_net`, normally `/sys/class/net`, if its `ifindex` there
    /// is `index_here`; `None` skips the check), waits for the thread to
    /// appear under `proc_root` (normally `/proc`) and places it on `cpu`,
    /// one real-time priority above `sched`. Errors name the file or the
    /// thread and why; on error nothing stays changed.
    pub fn apply(
        sys_class_net: &Path,
        proc_root: &Path,
        device: &str,
        index_here: Option<i32>,
        cpu: Option<u32>,
        sched: ThreadSched,
    ) -> Result<ThreadedNapi, String> {
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
                    "{} shows another network namespace (ifindex {:?}, {device} here is \
                     {index}); run under `ip netns exec`, which mounts the namespace's own sysfs",
                    dir.display(),
                    seen.trim()
                ));
            }
        }
        let file = dir.join("threaded");
        let was = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?
            .trim()
            .to_string();
        let mut t = ThreadedNapi {
            saved: None,
            threads: Vec::new(),
            notes: Vec::new(),
        };
        if was != "0" {
            t.notes.push(format!(
                "{device}'s NAPI is already threaded ({} is {was}): left as it is, its threads \
                 not placed",
                file.display()
            ));
            return Ok(t);
        }
        let before = napi_threads(proc_root, device);
        write(&file, "1")?;
        t.saved = Some((file, was));
        let start = Instant::now();
        while t.threads.is_empty() {
            t.threads = napi_threads(proc_root, device)
                .into_iter()
                .filter(|p| !before.contains(p))
                .collect();
            if t.threads.is_empty() {
                if start.elapsed() >= THREAD_WAIT {
                    // `t` drops and writes the old value back.
                    return Err(format!(
                        "no napi/{device}-* thread appeared within {THREAD_WAIT:?} of threaded \
                         NAPI on {device}"
                    ));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let prio = match sched {
            ThreadSched::Fifo(p) => Some((p + 1).min(99)),
            ThreadSched::Other => None,
        };
        for &tid in &t.threads {
            place_thread(tid, cpu, prio)?;
        }
        Ok(t)
    }

    /// Writes the previous value back (ending the NAPI threads).
    pub fn restore(mut self) -> Result<(), String> {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Result<(), String> {
        match self.saved.take() {
            Some((path, was)) => write(&path, &was),
            None => Ok(()),
        }
    }
}

impl Drop for ThreadedNapi {
    fn drop(&mut self) {
        if let Err(e) = self.restore_now() {
            eprintln!("pktsched: restoring the ingress's NAPI threading: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gettid() -> i32 {
        // SAFETY: gettid takes no argument and cannot fail.
        unsafe { libc::gettid() }
    }

    fn affinity(tid: i32) -> Vec<u32> {
        // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is valid and writable, of the size passed.
        let rc = unsafe {
            libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
        };
        assert_eq!(rc, 0, "sched_getaffinity");
        (0..libc::CPU_SETSIZE as u32)
            // SAFETY: CPU_ISSET reads one bit of a valid set.
            .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
            .collect()
    }

    /// A sysfs with device fw0 (`threaded` = `value`) and an empty /proc.
    fn fake(value: &str) -> (PathBuf, PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!(
            "pktsched-napi-thread-{}-{}",
            std::process::id(),
            crate::sys::monotonic_ns()
        ));
        let sys = root.join("net");
        let proc = root.join("proc");
        std::fs::create_dir_all(sys.join("fw0")).expect("dir");
        std::fs::create_dir_all(&proc).expect("dir");
        std::fs::write(sys.join("fw0/threaded"), value).expect("file");
        std::fs::write(sys.join("fw0/ifindex"), "7\n").expect("file");
        (root, sys, proc)
    }

    fn fake_thread(proc: &Path, tid: i32, comm: &str) {
        std::fs::create_dir_all(proc.join(tid.to_string())).expect("dir");
        std::fs::write(proc.join(tid.to_string()).join("comm"), comm).expect("comm");
    }

    #[test]
    fn napi_threads_are_found_by_their_cut_name() {
        let (root, _, proc) = fake("0\n");
        fake_thread(&proc, 30, "napi/fw0-8193\n");
        fake_thread(&proc, 31, "napi/fw01-8194\n"); // another device
        fake_thread(&proc, 32, "ksoftirqd/1\n");
        // A long name: the kernel keeps 15 bytes ("napi/" + 10).
        fake_thread(&proc, 33, "napi/abcdefghij\n");
        assert_eq!(napi_threads(&proc, "fw0"), vec![30]);
        assert_eq!(napi_threads(&proc, "abcdefghijklm"), vec![33]);
        assert!(napi_threads(&root.join("none"), "fw0").is_empty());
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn the_new_thread_is_placed_and_the_old_value_comes_back() {
        let (root, sys, proc) = fake("0\n");
        // A thread that was there before is not ours to place.
        fake_thread(&proc, 999_999, "napi/fw0-1\n");
        let me = gettid();
        let mine = affinity(me);
        let cpu = *mine.last().expect("a CPU");
        // The kernel would start the thread once `threaded` is 1: here
        // the test's own thread stands in for it.
        let starter = {
            let proc = proc.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                fake_thread(&proc, me, "napi/fw0-8193\n");
            })
        };
        let t = ThreadedNapi::apply(&sys, &proc, "fw0", Some(7), Some(cpu), ThreadSched::Other)
            .expect("apply");
        starter.join().expect("starter");
        assert_eq!(t.threads, vec![me], "only the new thread");
        assert_eq!(
            std::fs::read_to_string(sys.join("fw0/threaded")).expect("read"),
            "1"
        );
        assert_eq!(affinity(me), vec![cpu], "pinned to the forwarder's CPU");
        t.restore().expect("restore");
        assert_eq!(
            std::fs::read_to_string(sys.join("fw0/threaded")).expect("read"),
            "0"
        );
        place_thread(me, None, None).expect("no change");
        // Put the test thread's CPUs back.
        // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for c in mine {
            // SAFETY: CPU_SET writes one bit of a valid set; `c` came
            // from CPU_ISSET below CPU_SETSIZE.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        // SAFETY: `set` is a valid cpu_set_t of the size passed.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        assert_eq!(rc, 0);
        std::fs::remove_dir_all(root).expect("cleanup");
    }

    #[test]
    fn no_thread_already_threaded_or_a_bad_device_says_why_and_leaves_it() {
        let (root, sys, proc) = fake("0\n");
        let e = ThreadedNapi::apply(&sys, &proc, "fw0", None, Some(0), ThreadSched::Other)
            .expect_err("no thread appears");
        assert!(e.contains("no napi/fw0-* thread appeared"), "{e}");
        assert_eq!(
            std::fs::read_to_string(sys.join("fw0/threaded")).expect("read"),
            "0",
            "written back on the error path"
        );
        let e = ThreadedNapi::apply(&sys, &proc, "fw0", Some(8), None, ThreadSched::Other)
            .expect_err("other namespace");
        assert!(e.contains("another network namespace"), "{e}");
        let e = ThreadedNapi::apply(&sys, &proc, "../x", None, None, ThreadSched::Other)
            .expect_err("bad name");
        assert!(e.contains("not an interface name"), "{e}");
        let e = ThreadedNapi::apply(&sys, &proc, "fw9", None, None, ThreadSched::Other)
            .expect_err("no device");
        assert!(e.contains("fw9/threaded"), "{e}");
        std::fs::write(sys.join("fw0/threaded"), "1\n").expect("file");
        let t = ThreadedNapi::apply(&sys, &proc, "fw0", None, None, ThreadSched::Fifo(50))
            .expect("already threaded");
        assert!(t.threads.is_empty() && t.notes[0].contains("already threaded"));
        drop(t);
        assert_eq!(
            std::fs::read_to_string(sys.join("fw0/threaded")).expect("read"),
            "1\n",
            "not ours: untouched"
        );
        let e = place_thread(1, Some(libc::CPU_SETSIZE as u32), None).expect_err("range");
        assert!(e.contains("out of range"), "{e}");
        std::fs::remove_dir_all(root).expect("cleanup");
    }
}
