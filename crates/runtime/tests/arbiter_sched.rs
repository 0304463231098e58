//! The arbiter thread's scheduling policy (`Config::arbiter_sched`): under
//! `fifo:N` the thread named `pspat-arbiter` runs under SCHED_FIFO at N
//! and the runtime works as under the normal policy; a thread without
//! `CAP_SYS_NICE` is refused at start with an error naming the policy.
#![cfg(all(not(loom), target_os = "linux"))]
#![deny(unsafe_code)]
#![allow(clippy::unwrap_used)]

#[path = "../../io/tests/common/untested.rs"]
mod untested;
use std::time::Duration;
use untested::skipped;

use pktsched_core::{Algorithm, FlowId, Nanos, Pkt, Rate};
use pktsched_runtime::output::VecOutput;
use pktsched_runtime::pspat::{
    ArbiterSched, Clock, Config, Pspat, RuntimeError, StopMode, add_flows,
};

/// The policy and real-time priority of this process's thread named
/// `name` (fields 41 and 40 of its `stat`, counted after the name's
/// closing parenthesis), if there is one.
fn policy_of(name: &str) -> Option<(u32, u32)> {
    for t in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).ok()?;
        let (_, rest) = stat.rsplit_once(')')?;
        let f: Vec<&str> = rest.split_whitespace().collect();
        // `rest` starts at field 3.
        return Some((f.get(38)?.parse().ok()?, f.get(37)?.parse().ok()?));
    }
    None
}

/// Whether this thread may set a real-time policy (root, or
/// `CAP_SYS_NICE`): read from its effective capabilities.
fn has_cap_sys_nice() -> bool {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << caps::CAP_SYS_NICE) != 0)
}

#[test]
fn a_fifo_arbiter_runs_under_sched_fifo_and_delivers_everything() {
    if !has_cap_sys_nice() {
        skipped("this thread lacks CAP_SYS_NICE (the refusal test covers it)");
        return;
    }
    let cfg = Config {
        arbiter_sched: ArbiterSched::Fifo(7),
        nap_cover: Some(Duration::from_micros(200)),
        ..Config::new(Rate::gbit(10))
    };
    let mut sched = Algorithm::Qfq.build_send::<u64>();
    add_flows(sched.as_mut(), &[1], 1, 4096).unwrap();
    let rt = Pspat::start(&cfg, sched, vec![VecOutput::default()], Clock::new()).unwrap();
    let mut c = rt.client().unwrap();
    for i in 0..1_000u64 {
        while c.send(Pkt::new(FlowId(0), 1500, Nanos(0), i)).is_err() {
            std::thread::yield_now();
        }
    }
    // Until the arbiter thread has set its policy (the first thing it
    // does once it runs; 10 s is only a guard against a hang: on a loaded
    // machine the thread may not have been on a core yet).
    let mut seen = None;
    for _ in 0..10_000 {
        seen = policy_of("pspat-arbiter");
        if seen == Some((libc_sched_fifo(), 7)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let r = rt.stop(StopMode::Drain).unwrap();
    assert_eq!(seen, Some((libc_sched_fifo(), 7)), "(policy, priority)");
    let out: Vec<u64> = r
        .outputs
        .into_iter()
        .flat_map(|o| o.pkts)
        .map(|p| p.item)
        .collect();
    assert_eq!(out, (0..1_000).collect::<Vec<_>>());
    assert_eq!(r.arbiter.decisions + r.flushed, 1_000);
}

/// SCHED_FIFO's number in `stat`.
fn libc_sched_fifo() -> u32 {
    1
}

/// The soft `RLIMIT_RTPRIO` ("Max realtime priority" in `/proc`), which
/// lets a thread without `CAP_SYS_NICE` take real-time priorities up to
/// it.
fn rtprio_limit() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find_map(|l| l.strip_prefix("Max realtime priority"))
        .and_then(|rest| rest.split_whitespace().next())
        .map_or(0, |soft| soft.parse().unwrap_or(u64::MAX))
}

#[test]
fn without_cap_sys_nice_a_fifo_arbiter_is_refused_by_name() {
    // A soft RLIMIT_RTPRIO of 50 or more would let the thread take
    // priority 50 without the capability: lowered to 0 first (as the CLI's
    // test does with `prlimit --rtprio=0:0`). Lowering a soft limit is
    // always allowed; it is process-wide, which the other tests here do
    // not mind (they run with CAP_SYS_NICE, which ignores the limit, or
    // set no real-time policy).
    caps::lower_rtprio_soft_limit();
    assert_eq!(rtprio_limit(), 0, "RLIMIT_RTPRIO's soft limit lowered");
    // Capabilities are per thread, and threads inherit their creator's:
    // a thread that dropped CAP_SYS_NICE starts the runtime.
    let r = std::thread::spawn(|| {
        if !caps::drop_sys_nice() {
            return None;
        }
        let cfg = Config {
            arbiter_sched: ArbiterSched::Fifo(50),
            ..Config::new(Rate::gbit(10))
        };
        let mut sched = Algorithm::Fifo.build_send::<u64>();
        add_flows(sched.as_mut(), &[1], 1, 16).unwrap();
        Some(Pspat::start(&cfg, sched, vec![VecOutput::default()], Clock::new()).err())
    })
    .join()
    .unwrap();
    let Some(e) = r else {
        skipped("could not drop CAP_SYS_NICE (capset refused)");
        return;
    };
    assert!(
        matches!(
            e,
            Some(RuntimeError::Sched {
                policy: ArbiterSched::Fifo(50),
                ..
            })
        ),
        "{e:?}"
    );
    let text = e.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        text.contains("fifo:50") && text.contains("CAP_SYS_NICE") && text.contains("`other`"),
        "{text}"
    );
}

#[test]
fn bad_policies_are_refused_with_what_is_allowed() {
    assert_eq!("other".parse(), Ok(ArbiterSched::Other));
    assert_eq!("fifo:99".parse(), Ok(ArbiterSched::Fifo(99)));
    assert_eq!(ArbiterSched::Fifo(3).to_string(), "fifo:3");
    for (bad, want) in [
        ("rr", "`rr` is not a policy"),
        ("fifo", "`fifo` is not a policy"),
        ("fifo:0", "priority `0` is out of range"),
        ("fifo:100", "priority `100` is out of range"),
        ("fifo:-1", "priority `-1` is out of range"),
        ("fifo:x", "priority `x` is not a whole number"),
    ] {
        let e = bad.parse::<ArbiterSched>().err().unwrap_or_default();
        assert!(
            e.contains(want) && e.contains("fifo:N with N in 1..=99"),
            "{bad}: {e}"
        );
    }
    let cfg = Config {
        arbiter_sched: ArbiterSched::Fifo(0),
        ..Config::new(Rate::gbit(1))
    };
    let e = cfg
        .validate()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("arbiter_sched") && e.contains("fifo:0"), "{e}");
}

/// Dropping a capability from the calling thread (`capset(2)` on the
/// thread itself; the C library's wrappers are not in `libc`).
#[allow(unsafe_code)]
mod caps {
    /// Bit of CAP_SYS_NICE in the capability sets.
    pub(super) const CAP_SYS_NICE: u32 = 23;
    /// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
    const VERSION_3: u32 = 0x2008_0522;

    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }

    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }

    /// Sets this process's soft `RLIMIT_RTPRIO` to 0 (the hard limit
    /// stays); panics if the kernel refuses (it may not: a soft limit may
    /// always go down).
    pub(super) fn lower_rtprio_soft_limit() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit for the call.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut lim) };
        assert_eq!(
            rc,
            0,
            "getrlimit(RLIMIT_RTPRIO): {}",
            std::io::Error::last_os_error()
        );
        lim.rlim_cur = 0;
        // SAFETY: as above; setrlimit only reads it.
        let rc = unsafe { libc::setrlimit(libc::RLIMIT_RTPRIO, &lim) };
        assert_eq!(
            rc,
            0,
            "setrlimit(RLIMIT_RTPRIO, 0): {}",
            std::io::Error::last_os_error()
        );
    }

    /// Removes CAP_SYS_NICE from the calling thread's effective and
    /// permitted sets; `false` if the kernel refused.
    pub(super) fn drop_sys_nice() -> bool {
        let mut h = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut d = [Data::default(); 2];
        // SAFETY: `h` and `d` are a valid version-3 header and its two
        // data words, alive and writable for the call; pid 0 is the
        // calling thread.
        let rc = unsafe { libc::syscall(libc::SYS_capget, &mut h, d.as_mut_ptr()) };
        if rc != 0 {
            return false;
        }
        d[0].effective &= !(1 << CAP_SYS_NICE);
        d[0].permitted &= !(1 << CAP_SYS_NICE);
        // SAFETY: as above; capset only reads them.
        let rc = unsafe { libc::syscall(libc::SYS_capset, &h, d.as_ptr()) };
        rc == 0 && !super::has_cap_sys_nice()
    }
}
