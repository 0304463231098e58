//! Pinning the forwarder's threads to a CPU and giving them a real-time
//! policy (`link.cpu`, `link.sched`). Threads inherit both from the thread
//! that starts them, so the daemon places its own thread, starts the
//! pipeline, and goes back ([`Placed`]'s drop): the pipeline's threads get
//! the policy while the privilege it takes (`CAP_SYS_NICE` for
//! `SCHED_FIFO`) is still held, and no other thread keeps it.

use crate::config::ThreadSched;

/// The calling thread's CPUs and policy before [`place_calling_thread`];
/// dropping it restores them (best effort: lowering a policy and widening
/// one's own CPUs back to what they were needs no privilege).
pub struct Placed {
    cpus: Option<libc::cpu_set_t>,
    policy: Option<(libc::c_int, libc::c_int)>,
}

impl std::fmt::Debug for Placed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placed")
            .field("cpus_saved", &self.cpus.is_some())
            .field("policy", &self.policy)
            .finish()
    }
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> std::io::Result<Vec<u32>> {
    let set = get_affinity()?;
    Ok((0..libc::CPU_SETSIZE as u32)
        // SAFETY: CPU_ISSET reads one bit of a valid set; `c` is below
        // CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c as usize, &set) })
        .collect())
}

fn get_affinity() -> std::io::Result<libc::cpu_set_t> {
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable cpu_set_t of the size passed;
    // pid 0 is the calling thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(set)
}

fn set_affinity(set: &libc::cpu_set_t) -> std::io::Result<()> {
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the
    // calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn set_policy(policy: libc::c_int, priority: libc::c_int) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param for the call; pid 0 is the
    // calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn pin(cpu: u32) -> Result<libc::cpu_set_t, String> {
    let before = get_affinity().map_err(|e| format!("CPU {cpu}: sched_getaffinity: {e}"))?;
    let allowed = allowed_cpus().unwrap_or_default();
    if !allowed.contains(&cpu) {
        return Err(format!(
            "CPU {cpu} is not one this process may run on: allowed {}",
            cpu_list(&allowed)
        ));
    }
    // SAFETY: an all-zero cpu_set_t is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: CPU_SET writes one bit of a valid set; `cpu` is below
    // CPU_SETSIZE (it is in the allowed list).
    unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    set_affinity(&set).map_err(|e| format!("CPU {cpu}: sched_setaffinity: {e}"))?;
    Ok(before)
}

/// Pins the calling thread to `cpu` and gives it `sched`; threads it
/// starts inherit both. The error names the setting, the value and what
/// is allowed (or the privilege missing). Nothing is changed when both
/// are the defaults.
pub fn place_calling_thread(cpu: Option<u32>, sched: ThreadSched) -> Result<Placed, String> {
    let mut placed = Placed {
        cpus: None,
        policy: None,
    };
    if let Some(cpu) = cpu {
        placed.cpus = Some(pin(cpu)?);
    }
    if let ThreadSched::Fifo(prio) = sched {
        // Policy and priority both, so a daemon started under a real-time
        // policy (chrt, systemd) gets it back whole.
        let (policy, priority) = calling_thread_policy();
        set_policy(libc::SCHED_FIFO, prio as libc::c_int).map_err(|e| {
            let why = if e.raw_os_error() == Some(libc::EPERM) {
                format!(
                    "SCHED_FIFO needs CAP_SYS_NICE (run as root or grant it) or an \
                     RLIMIT_RTPRIO of at least {prio}"
                )
            } else {
                format!("sched_setscheduler: {e}")
            };
            format!("policy {sched}: {why}")
        })?;
        placed.policy = Some((policy.max(0), priority.max(0)));
    }
    Ok(placed)
}

impl Drop for Placed {
    fn drop(&mut self) {
        if let Some((policy, prio)) = self.policy.take() {
            let _ = set_policy(policy, prio);
        }
        if let Some(set) = self.cpus.take() {
            let _ = set_affinity(&set);
        }
    }
}

/// `0-3,6` style.
pub fn cpu_list(cpus: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            cpus[i].to_string()
        } else {
            format!("{}-{}", cpus[i], cpus[j])
        });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(",")
    }
}

/// The calling thread's policy and real-time priority
/// (`sched_getscheduler`, `sched_getparam`).
pub fn calling_thread_policy() -> (libc::c_int, libc::c_int) {
    // SAFETY: sched_getscheduler takes a pid (0: the calling thread).
    let policy = unsafe { libc::sched_getscheduler(0) };
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable sched_param for the call.
    let _ = unsafe { libc::sched_getparam(0, &mut param) };
    (policy, param.sched_priority)
}

#[cfg(test)]
mod tests {
    use super::{allowed_cpus, calling_thread_policy, cpu_list, place_calling_thread};
    use crate::config::ThreadSched;

    #[test]
    fn cpu_lists_collapse_runs() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(cpu_list(&[1]), "1");
        assert_eq!(cpu_list(&[]), "none");
    }

    #[test]
    fn a_cpu_outside_the_allowed_set_is_refused_by_number_and_nothing_changes() {
        std::thread::spawn(|| {
            let before = allowed_cpus().expect("affinity");
            let e = place_calling_thread(Some(1000), ThreadSched::Other).expect_err("cpu 1000");
            assert!(e.contains("CPU 1000 is not one"), "{e}");
            assert!(e.contains("allowed"), "{e}");
            assert_eq!(allowed_cpus().expect("affinity"), before);
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn fifo_without_cap_sys_nice_is_refused_naming_the_capability() {
        std::thread::spawn(|| {
            crate::sys::drop_capabilities().expect("drop");
            let mut lim = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: `lim` is a valid, writable rlimit.
            let _ = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) };
            if lim.rlim_cur >= 10 {
                eprintln!(
                    "RLIMIT_RTPRIO {} allows fifo:10 without privilege: skipped",
                    lim.rlim_cur
                );
                return;
            }
            let e = place_calling_thread(None, ThreadSched::Fifo(10)).expect_err("no privilege");
            assert!(e.contains("policy fifo:10"), "{e}");
            assert!(e.contains("CAP_SYS_NICE"), "{e}");
            assert_eq!(calling_thread_policy(), (libc::SCHED_OTHER, 0));
        })
        .join()
        .expect("thread");
    }

    #[test]
    fn a_placed_thread_is_pinned_with_its_policy_until_the_guard_goes() {
        std::thread::spawn(|| {
            let before = allowed_cpus().expect("affinity");
            let cpu = *before.last().expect("a cpu");
            let root = crate::sys::effective_capabilities().is_some_and(|c| c & (1 << 23) != 0);
            let sched = if root {
                ThreadSched::Fifo(3)
            } else {
                eprintln!("no CAP_SYS_NICE: checking the pin only");
                ThreadSched::Other
            };
            let placed = place_calling_thread(Some(cpu), sched).expect("place");
            assert_eq!(allowed_cpus().expect("affinity"), vec![cpu]);
            let child =
                std::thread::spawn(|| (allowed_cpus().expect("affinity"), calling_thread_policy()))
                    .join()
                    .expect("child");
            assert_eq!(child.0, vec![cpu], "a thread started now inherits the pin");
            if root {
                assert_eq!(calling_thread_policy(), (libc::SCHED_FIFO, 3));
                assert_eq!(child.1, (libc::SCHED_FIFO, 3), "and the policy");
            }
            drop(placed);
            assert_eq!(allowed_cpus().expect("affinity"), before);
            assert_eq!(calling_thread_policy(), (libc::SCHED_OTHER, 0));
        })
        .join()
        .expect("thread");
    }
}
