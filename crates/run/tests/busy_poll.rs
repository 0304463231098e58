//! Busy polling (`link.busy_poll`) on real veths: the daemon, in
//! namespaces of its own (prefix `fwbp-`), forwards a paced flow from the
//! generator to the sink with its run-to-completion thread pinned and
//! never sleeping, stops cleanly, and every frame is accounted for.
//! Needs root (CI runs as root); skipped with a message otherwise.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
        eprintln!("skipped: needs root to create network namespaces");
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
