//! `link.cpu` and `link.sched`: the daemon's forwarding threads run pinned
//! and under `SCHED_FIFO`, while its control thread keeps the normal
//! policy and every CPU. The daemon runs in a thread of this process, in
//! namespaces of its own (prefix `vx-pl-`), and the test reads the threads'
//! policy, real-time priority and CPUs from `/proc/self/task/*`. Needs
//! root; skipped otherwise.

#[path = "../../io/tests/common/untested.rs"]
mod untested;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use untested::skipped;

use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::daemon::{self, DaemonEvents, DaemonOptions, ThreadOverrides};
use pktsched_run::sys::allowed_cpus;

struct Log;
impl DaemonEvents for Log {
    fn log(&mut self, line: &str) {
        eprintln!("daemon: {line}");
    }
}

/// Policy, rt priority and `Cpus_allowed_list` of this process's thread
/// named `name`, if it exists.
fn thread_placement(name: &str) -> Option<(u32, u32, String)> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        // The kernel keeps 15 bytes of a thread's name.
        if comm.trim_end() != &name[..name.len().min(15)] {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        // Fields after the `(comm)`: state is field 3, rt_priority 40,
        // policy 41.
        let after = stat.rsplit_once(')')?.1;
        let f: Vec<&str> = after.split_whitespace().collect();
        let rt_priority = f.get(40 - 3)?.parse().ok()?;
        let policy = f.get(41 - 3)?.parse().ok()?;
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
            .trim()
            .to_string();
        return Some((policy, rt_priority, cpus));
    }
    None
}

fn config(dir: &Path, extra: &str) -> String {
    format!(
        "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"100mbit\"\nbackend = \"packet\"\n{extra}\n\
         [control]\nsocket = \"{}/s.sock\"\n\n\
         [[class]]\nname = \"a\"\ndefault = true\n",
        dir.display()
    )
}

/// Runs the daemon on `ns` with `extra` in `[link]` and `threads`, and
/// returns what `probe` saw while it ran, or the daemon's error.
fn with_daemon<T: Send>(
    tag: &str,
    extra: &str,
    threads: ThreadOverrides,
    probe: impl FnOnce() -> T + Send,
) -> Result<T, String> {
    // Threads are found by name in this process: one daemon at a time.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(PoisonError::into_inner);
    let topo = Topology::line(&format!("vx-pl{tag}-")).expect("topology");
    let dir = std::env::temp_dir().join(format!("vx-pl{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("c.toml");
    std::fs::write(&path, config(&dir, extra)).expect("config");
    let opts = DaemonOptions {
        config: path,
        duration: Some(Duration::from_secs(30)),
        keep_privileges: false,
        user: None,
        threads,
    };
    let stop = AtomicBool::new(false);
    let ns = topo.dut_ns.clone();
    let (seen, ran) = std::thread::scope(|s| {
        let d = s.spawn(|| {
            in_namespace(&ns, || {
                daemon::run(&opts, &stop, &|| false, false, &mut Log)
            })
            .expect("namespace")
        });
        let until = Instant::now() + Duration::from_secs(20);
        while thread_placement("pktsched-control").is_none() && !d.is_finished() {
            assert!(Instant::now() < until, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let seen = (!d.is_finished()).then(probe);
        stop.store(true, Ordering::Release);
        (seen, d.join().expect("daemon thread"))
    });
    let _ = std::fs::remove_dir_all(&dir);
    drop(topo);
    ran.map(|_| seen.expect("the daemon ran"))
}

#[test]
fn the_forwarder_runs_pinned_under_sched_fifo_and_the_control_thread_does_not() {
    if !is_root() {
        skipped("needs root for namespaces and SCHED_FIFO");
        return;
    }
    let all = allowed_cpus().expect("affinity");
    let cpu = *all.last().expect("a cpu");
    let seen = with_daemon(
        "f",
        &format!("cpu = {cpu}\nsched = \"fifo:7\""),
        ThreadOverrides::default(),
        || {
            (
                thread_placement("pktsched-rtc"),
                thread_placement("pktsched-reverse"),
                thread_placement("pktsched-control"),
            )
        },
    )
    .expect("daemon");
    let fifo = libc::SCHED_FIFO as u32;
    assert_eq!(seen.0, Some((fifo, 7, cpu.to_string())), "rtc thread");
    assert_eq!(seen.1, Some((fifo, 7, cpu.to_string())), "reverse thread");
    let control = seen.2.expect("control thread");
    assert_eq!((control.0, control.1), (libc::SCHED_OTHER as u32, 0));
    if all.len() > 1 {
        assert_ne!(
            control.2,
            cpu.to_string(),
            "the control thread is not pinned"
        );
    }
}

#[test]
fn the_command_line_overrides_the_config_and_bad_cpus_are_refused() {
    if !is_root() {
        skipped("needs root for namespaces and SCHED_FIFO");
        return;
    }
    let cpu = *allowed_cpus().expect("affinity").first().expect("a cpu");
    let over = ThreadOverrides {
        cpu: Some(cpu),
        sched: Some(pktsched_run::config::ThreadSched::Fifo(3)),
        busy_poll: None,
    };
    let seen = with_daemon("o", "cpu = 1000\nsched = \"other\"", over, || {
        thread_placement("pktsched-rtc")
    })
    .expect("daemon");
    assert_eq!(seen, Some((libc::SCHED_FIFO as u32, 3, cpu.to_string())));
    let e =
        with_daemon("b", "cpu = 1000", ThreadOverrides::default(), || ()).expect_err("cpu 1000");
    assert!(
        e.contains("link.cpu") && e.contains("CPU 1000 is not one"),
        "{e}"
    );
    assert!(e.contains("allowed"), "{e}");
}
