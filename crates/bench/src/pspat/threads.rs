//! Where the bench's threads spent a run's measured window, from the
//! kernel's per-thread counters (`/proc/self/task/*/schedstat` and
//! `status`): time on a core, time runnable but waiting for one, and
//! involuntary context switches, summed per role (the arbiter, the
//! clients, the victim). Threads are told apart by name ([`ROLES`]).
//!
//! This is what separates "the arbiter was not scheduled" from "the
//! arbiter was busy with others" and "the client lost its core": a thread
//! that waits long in the run queue while the link idles did not get a
//! core.

use std::fs;

use serde::Serialize;

/// Thread names (`comm`) of the roles, as the bench and the runtime name
/// their threads.
pub(crate) const ROLES: [(&str, Role); 3] = [
    ("pspat-arbiter", Role::Arbiter),
    (CLIENT_NAME, Role::Clients),
    (VICTIM_NAME, Role::Victim),
];

/// Name of the bench's (non-victim) client threads.
pub(crate) const CLIENT_NAME: &str = "bench-client";
/// Name of the victim's thread.
pub(crate) const VICTIM_NAME: &str = "bench-victim";
/// Name of the `--busy-core` thread (no role: not counted).
pub(crate) const BUSY_NAME: &str = "bench-busy";

/// A role's threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Arbiter,
    Clients,
    Victim,
}

/// One thread's counters (or a role's sums), ns and switches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Time on a core.
    run_ns: u64,
    /// Time runnable, waiting for a core.
    wait_ns: u64,
    /// Involuntary context switches (preempted).
    preempted: u64,
    /// The cores the threads last ran on (bit n: core n; cores 64 and up
    /// are not shown).
    cores: u64,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.run_ns += o.run_ns;
        self.wait_ns += o.wait_ns;
        self.preempted += o.preempted;
        self.cores |= o.cores;
    }
}

/// The roles' counters at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Snapshot {
    arbiter: Counts,
    clients: Counts,
    victim: Counts,
}

/// Reads the counters of this process's threads, summed by role (threads
/// of other names are left out; threads that end between listing and
/// reading are skipped).
pub(crate) fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return s;
    };
    for t in tasks.flatten() {
        let dir = t.path();
        let Ok(comm) = fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        let Some(role) = role_of(comm.trim_end()) else {
            continue;
        };
        let (Ok(sched), Ok(status)) = (
            fs::read_to_string(dir.join("schedstat")),
            fs::read_to_string(dir.join("status")),
        ) else {
            continue;
        };
        let Some(mut c) = parse(&sched, &status) else {
            continue;
        };
        c.cores = fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|t| last_core(&t))
            .map_or(0, |n| 1u64.checked_shl(n).unwrap_or(0));
        match role {
            Role::Arbiter => s.arbiter.add(c),
            Role::Clients => s.clients.add(c),
            Role::Victim => s.victim.add(c),
        }
    }
    s
}

fn role_of(comm: &str) -> Option<Role> {
    ROLES.iter().find(|(n, _)| *n == comm).map(|&(_, r)| r)
}

/// One thread's counters from its `schedstat` ("run wait slices") and
/// `status` (`nonvoluntary_ctxt_switches:`) texts; `None` if either is
/// not in that form.
fn parse(schedstat: &str, status: &str) -> Option<Counts> {
    let mut f = schedstat.split_whitespace().map(str::parse::<u64>);
    let run_ns = f.next()?.ok()?;
    let wait_ns = f.next()?.ok()?;
    let preempted = status
        .lines()
        .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()?;
    Some(Counts {
        run_ns,
        wait_ns,
        preempted,
        cores: 0,
    })
}

/// The core a thread last ran on: field 39 (`processor`) of its `stat`
/// text, counted after the command name's closing parenthesis (the name
/// may hold spaces and parentheses).
fn last_core(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// One role over a window: shares of the window's wall time (summed over
/// the role's threads, so clients can exceed 1) and preemptions per
/// second.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct RoleWindow {
    /// On a core.
    pub cpu: f64,
    /// Runnable, waiting for a core.
    pub wait: f64,
    /// Involuntary context switches per second.
    pub preempted_per_s: f64,
    /// The cores the role's threads last ran on at the window's end (bit
    /// n: core n).
    pub cores: u64,
}

/// Every role over a window.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ThreadsWindow {
    /// PSPAT's arbiter thread (zero for the other architectures).
    pub arbiter: RoleWindow,
    /// The client threads together.
    pub clients: RoleWindow,
    /// The victim's thread.
    pub victim: RoleWindow,
}

impl ThreadsWindow {
    /// From snapshots `a` (start) and `b` (end) `secs` apart.
    pub(crate) fn between(a: &Snapshot, b: &Snapshot, secs: f64) -> ThreadsWindow {
        let secs = secs.max(1e-9);
        let role = |x: Counts, y: Counts| RoleWindow {
            cpu: y.run_ns.saturating_sub(x.run_ns) as f64 / 1e9 / secs,
            wait: y.wait_ns.saturating_sub(x.wait_ns) as f64 / 1e9 / secs,
            preempted_per_s: y.preempted.saturating_sub(x.preempted) as f64 / secs,
            cores: y.cores,
        };
        ThreadsWindow {
            arbiter: role(a.arbiter, b.arbiter),
            clients: role(a.clients, b.clients),
            victim: role(a.victim, b.victim),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Counts, Role, Snapshot, ThreadsWindow, last_core, parse, role_of};

    #[test]
    fn the_last_core_is_field_39_after_the_name() {
        // pid (comm) then fields 3..=52; field 39 is 5 here.
        let tail: Vec<String> = (3..=52)
            .map(|f| if f == 39 { "5".into() } else { f.to_string() })
            .collect();
        let stat = format!("1234 (a (b) c) {}", tail.join(" "));
        assert_eq!(last_core(&stat), Some(5));
        assert_eq!(last_core("1234 (x) S 1 2"), None);
        assert_eq!(last_core("no parenthesis"), None);
        // This thread's own stat parses.
        let own = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
        assert!(last_core(&own).is_some(), "{own}");
    }

    #[test]
    fn a_threads_counters_are_read_from_schedstat_and_status() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t42\n";
        assert_eq!(
            parse("1500 250 9\n", status),
            Some(Counts {
                run_ns: 1500,
                wait_ns: 250,
                preempted: 42,
                cores: 0,
            })
        );
        assert_eq!(parse("1500\n", status), None);
        assert_eq!(parse("x 1 2\n", status), None);
        assert_eq!(parse("1 2 3\n", "Name:\tx\n"), None);
        assert_eq!(role_of("pspat-arbiter"), Some(Role::Arbiter));
        assert_eq!(role_of("bench-victim"), Some(Role::Victim));
        assert_eq!(role_of("pspat-dispatch-0"), None);
    }

    #[test]
    fn the_window_is_the_difference_over_its_length() {
        let c = |run_ns, wait_ns, preempted| Counts {
            run_ns,
            wait_ns,
            preempted,
            cores: 0,
        };
        let a = Snapshot {
            arbiter: c(1_000, 0, 10),
            clients: c(0, 0, 0),
            victim: c(5, 5, 5),
        };
        let b = Snapshot {
            arbiter: c(501_000, 250_000, 110),
            clients: c(1_500_000, 100_000, 50),
            victim: c(5, 5, 5),
        };
        let w = ThreadsWindow::between(&a, &b, 0.001);
        assert!((w.arbiter.cpu - 0.5).abs() < 1e-9, "{w:?}");
        assert!((w.arbiter.wait - 0.25).abs() < 1e-9, "{w:?}");
        assert!(
            (w.arbiter.preempted_per_s - 100_000.0).abs() < 1e-6,
            "{w:?}"
        );
        assert!((w.clients.cpu - 1.5).abs() < 1e-9, "{w:?}");
        assert_eq!(w.victim.cpu, 0.0);
        // Counters that went back give zeros, not negatives.
        let back = ThreadsWindow::between(&b, &a, 0.001);
        assert_eq!(back.clients.cpu, 0.0);
    }

    #[test]
    fn this_process_threads_are_found_by_name() {
        let h = std::thread::Builder::new()
            .name(super::VICTIM_NAME.into())
            .spawn(|| {
                let t0 = std::time::Instant::now();
                let mut x = 0u64;
                while t0.elapsed() < std::time::Duration::from_millis(20) {
                    x = x.wrapping_add(1);
                }
                (x, super::snapshot())
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let (_, s) = h.join().unwrap_or_else(|_| panic!("thread"));
        // 20 ms of spinning: the victim's thread shows run time; no
        // arbiter runs in this test.
        assert!(s.victim.run_ns > 0, "{s:?}");
        assert_eq!(s.arbiter, Counts::default());
    }
}
