//! Busy polling (`link.busy_poll`) on real veths: the daemon, in
//! namespaces of its own (prefix `fwbp-`), forwards a paced flow from the
//! generator to the sink with its run-to-completion thread pinned and
//! never sleeping, stops cleanly, and every frame is accounted for; and
//! threaded NAPI ([`pktsched_run::sys::ThreadedNapi`]) on a real veth
//! with an XDP program (namespaces `c7nt-`): the kernel's thread is found,
//! pinned and given its priority, and goes when the setting goes back.
//! Needs root (CI runs as root); skipped with a message otherwise.

#[path = "../../io/tests/common/untested.rs"]
mod untested;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use untested::skipped;

use pktsched_io::netns::{Topology, in_namespace, is_root};
use pktsched_run::daemon::{self, DaemonEvents, DaemonOptions, ThreadOverrides};
use pktsched_run::sys::allowed_cpus;
use pktsched_run::traffic::gen_flows::FlowSpec;
use pktsched_run::traffic::generator::{GenBackend, generate_with};
use pktsched_run::traffic::sink::Sink;

/// Keeps the daemon's log lines for the assertions.
#[derive(Default)]
struct Log(Vec<String>);
impl DaemonEvents for Log {
    fn log(&mut self, line: &str) {
        eprintln!("daemon: {line}");
        self.0.push(line.to_string());
    }
}

/// Voluntary context switches (sleeps) of this process's thread named
/// `name`, if it exists.
fn sleeps_of(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).ok()?;
        return status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok());
    }
    None
}

#[test]
fn a_busy_polling_forwarder_forwards_without_sleeping_and_stops_with_every_frame_counted() {
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("fwbp-").expect("topology");
    let dir = std::env::temp_dir().join(format!("fwbp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let cpu = *allowed_cpus().expect("affinity").last().expect("a cpu");
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            "[link]\ningress = \"d0\"\negress = \"d1\"\nrate = \"1gbit\"\nbusy_poll = 32\n\
             cpu = {cpu}\n\n[scheduler]\nalgorithm = \"prio\"\n\n\
             [control]\nsocket = \"{}/s.sock\"\n\n\
             [[class]]\nname = \"urgent\"\nprio = 0\nmatch = [{{ dport = 5000 }}]\n\n\
             [[class]]\nname = \"bulk\"\nprio = 1\ndefault = true\n",
            dir.display()
        ),
    )
    .expect("config");
    let opts = DaemonOptions {
        config: path,
        duration: Some(Duration::from_secs(60)),
        keep_privileges: true,
        user: None,
        threads: ThreadOverrides::default(),
    };
    let sink = in_namespace(&topo.sink_ns, || {
        Sink::bind("198.18.0.2".parse().expect("ip"), &[5000, 5001])
    })
    .expect("namespace")
    .expect("bind");
    let base = FlowSpec::new("198.18.0.2".parse().expect("ip"));
    // Paced, far below the link: an idle forwarder would sleep between
    // almost every two frames.
    let specs: Vec<FlowSpec> = [
        "dport=5000,rate=2mbit,size=200",
        "dport=5001,rate=2mbit,size=200",
    ]
    .iter()
    .map(|f| FlowSpec::parse_cli(f, &base).expect("flow"))
    .collect();
    let stop = AtomicBool::new(false);
    let never = AtomicBool::new(false);
    let mut log = Log::default();
    let (sent, received, sleeps, ran) = std::thread::scope(|s| {
        let ns = topo.dut_ns.clone();
        let (opts, stop, log) = (&opts, &stop, &mut log);
        let d = s.spawn(move || {
            in_namespace(&ns, || daemon::run(opts, stop, &|| false, false, log)).expect("namespace")
        });
        let until = Instant::now() + Duration::from_secs(20);
        while sleeps_of("pktsched-rtc").is_none() && !d.is_finished() {
            assert!(Instant::now() < until, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        let receiving = s.spawn(|| sink.run(None, Duration::from_secs(2), &never));
        let before = sleeps_of("pktsched-rtc");
        let sent = in_namespace(&topo.gen_ns, || {
            generate_with(
                &GenBackend::Socket,
                &specs,
                Duration::from_secs(2),
                7,
                &never,
                &mut |_| {},
            )
        })
        .expect("namespace")
        .expect("generate");
        let after = sleeps_of("pktsched-rtc");
        let received = receiving.join().expect("sink thread");
        stop.store(true, Ordering::Release);
        let sleeps = after.zip(before).map(|(a, b)| a - b);
        (sent, received, sleeps, d.join().expect("daemon thread"))
    });
    let _ = std::fs::remove_dir_all(&dir);
    drop(topo);
    let fin = ran.expect("the daemon ran and stopped");
    let snap = &fin.after_stop;
    let frames: u64 = sent.flows.iter().map(|f| f.sent).sum();
    assert!(frames > 1000, "the generator sent {frames}");
    assert!(
        log.0
            .iter()
            .any(|l| l.contains("busy polling d0: budget 32")),
        "{:?}",
        log.0
    );
    // Every frame sent arrived; every frame received is accounted for.
    let got: u64 = received.flows.iter().map(|f| f.received).sum();
    assert_eq!(got, frames, "{}\n{}", received.text(), snap.text());
    for c in &snap.classes {
        assert_eq!(
            c.received,
            c.packets + c.drops + c.qlen,
            "{}: {}",
            c.class,
            snap.text()
        );
        assert_eq!(c.qlen, 0, "sent at stop");
    }
    let through: u64 = snap.classes.iter().map(|c| c.packets).sum();
    assert!(through >= frames, "{through} of {frames}: {}", snap.text());
    // It polled instead of sleeping: a sleeping forwarder would have slept
    // about once per frame at this pace.
    let sleeps = sleeps.expect("the rtc thread's counters");
    assert!(sleeps * 20 < frames, "{sleeps} sleeps for {frames} frames");
}

/// A sysfs mounted from inside a network namespace (it shows that
/// namespace's devices), unmounted and removed when dropped.
struct NsSysfs(std::path::PathBuf);

impl NsSysfs {
    fn mount(ns: &str, name: &str) -> NsSysfs {
        let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let guard = NsSysfs(dir);
        // nsenter enters the network namespace only: the mount lands in
        // this process's mount namespace, tagged with the device's.
        let st = std::process::Command::new("nsenter")
            .arg(format!("--net=/run/netns/{ns}"))
            .args(["mount", "-t", "sysfs", "sysfs"])
            .arg(&guard.0)
            .status()
            .expect("nsenter");
        assert!(st.success(), "mounting the namespace's sysfs: {st}");
        guard
    }
}

impl Drop for NsSysfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A thread's CPU list and (policy, real-time priority), from /proc.
fn placement_of(tid: i32) -> (String, u32, u32) {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).expect("status");
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("cpus")
        .trim()
        .to_string();
    let stat = std::fs::read_to_string(format!("/proc/{tid}/stat")).expect("stat");
    // Fields after the name: state is field 3, rt_priority 40, policy 41.
    let rest: Vec<&str> = stat[stat.rfind(')').expect("name") + 2..]
        .split_whitespace()
        .collect();
    (
        cpus,
        rest[41 - 3].parse().expect("policy"),
        rest[40 - 3].parse().expect("prio"),
    )
}

#[test]
fn threaded_napi_on_a_veth_pins_the_kernels_thread_and_goes_back() {
    use pktsched_run::config::ThreadSched;
    use pktsched_run::sys::ThreadedNapi;
    if !is_root() {
        skipped("needs root to create network namespaces");
        return;
    }
    let topo = Topology::line("c7nt-").expect("topology");
    let sysfs = NsSysfs::mount(&topo.dut_ns, "c7nt-sys");
    let net = sysfs.0.join("class/net");
    let cpu = *allowed_cpus().expect("affinity").last().expect("a cpu");
    let was = std::fs::read_to_string(net.join("d0/threaded")).expect("threaded");
    assert_eq!(was.trim(), "0", "veth starts unthreaded");
    in_namespace(&topo.dut_ns, || {
        // veth has a NAPI context only with an XDP program attached.
        let xdp = pktsched_io::xdp::open("d0", &pktsched_io::xdp::XdpConfig::default())
            .expect("AF_XDP on d0");
        let index: i32 = std::fs::read_to_string(net.join("d0/ifindex"))
            .expect("ifindex")
            .trim()
            .parse()
            .expect("number");
        let t = ThreadedNapi::apply(
            &net,
            std::path::Path::new("/proc"),
            "d0",
            Some(index),
            Some(cpu),
            ThreadSched::Fifo(10),
        )
        .expect("threaded NAPI");
        assert!(!t.threads.is_empty(), "a napi/d0-* thread: {:?}", t.notes);
        let tids = t.threads.clone();
        for &tid in &tids {
            let comm = std::fs::read_to_string(format!("/proc/{tid}/comm")).expect("comm");
            assert!(comm.starts_with("napi/d0-"), "{comm}");
            assert_eq!(
                placement_of(tid),
                (cpu.to_string(), libc::SCHED_FIFO as u32, 11),
                "pinned, one above the forwarder's FIFO 10"
            );
        }
        assert_eq!(
            std::fs::read_to_string(net.join("d0/threaded"))
                .expect("read")
                .trim(),
            "1"
        );
        // The same namespace's sysfs seen by index: another namespace's
        // d0 would be refused.
        let e = ThreadedNapi::apply(
            &net,
            std::path::Path::new("/proc"),
            "d0",
            Some(index + 1000),
            None,
            ThreadSched::Other,
        )
        .expect_err("another index");
        assert!(e.contains("another network namespace"), "{e}");
        t.restore().expect("restore");
        assert_eq!(
            std::fs::read_to_string(net.join("d0/threaded"))
                .expect("read")
                .trim(),
            "0"
        );
        // The kernel stops the thread once NAPI is no longer threaded
        // (30 s: a bound on a hang, not a timing goal; a loaded machine
        // may take a while to run the thread's exit).
        let start = Instant::now();
        while tids.iter().any(|t| {
            std::fs::read_to_string(format!("/proc/{t}/comm"))
                .is_ok_and(|c| c.starts_with("napi/d0-"))
        }) {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "napi thread still there after 30 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(xdp);
    })
    .expect("namespace");
    drop(sysfs);
    drop(topo);
}
