//! What both architectures share, below the PSPAT modules: the runtime's
//! [`Config`], its [`RuntimeError`], the [`Clock`], what stop does with
//! queued packets ([`StopMode`]), what a send reports ([`Sent`]), the
//! scheduler type the runtime owns ([`BoxedScheduler`]) and two helpers for
//! benches and tests ([`add_flows`], [`thread_cpu_ns`]).
//!
//! [`crate::locked`] (the `tc` baseline) uses only this module, so it never
//! depends on the PSPAT client, arbiter or driver.

use std::time::{Duration, Instant};

use pktsched_core::{FlowConfig, FlowId, Nanos, Rate, Scheduler};

/// A scheduler the arbiter thread (or the locked baseline) can own.
pub type BoxedScheduler<T> = Box<dyn Scheduler<T> + Send>;

/// Runtime parameters. `Config::new(rate)` gives the defaults.
#[derive(Clone, Debug)]
pub struct Config {
    /// Rate of the emulated link.
    pub link: Rate,
    /// Δ_A: minimum time between the starts of two arbiter rounds
    /// (zero: back to back).
    pub scan_interval: Duration,
    /// Minimum time between two reads of one client's mailbox (PSPAT reads
    /// each client list at most once per microsecond), so a sending client
    /// fills whole lines before the arbiter pulls them.
    pub read_interval: Duration,
    /// Most packets released in one round (PSPAT: 512), or as many as were
    /// drained in the round if that is more, so an unlimited link keeps up.
    pub round_cap: usize,
    /// Most packets taken from one mailbox per read: bounds a round's length
    /// (and so every client's wait) when many clients are backlogged. A read
    /// also ends at the first packet the scheduler drops.
    pub read_batch: usize,
    /// Capacity of each client mailbox (packets).
    pub mailbox_capacity: usize,
    /// Most clients.
    pub max_clients: usize,
    /// Consecutive empty reads after which a client may leave the active
    /// list (at the next settle).
    pub trim_after: u32,
    /// Minimum time between two settles: a heavy barrier (`membarrier`,
    /// a few µs) after which idle clients whose mailbox is still empty
    /// leave the active list (see `doorbell`). Until then an idle client
    /// costs one empty read per `read_interval`.
    pub settle_interval: Duration,
    /// T_w: how long an idle arbiter (or dispatcher) spins before sleeping.
    pub spin: Duration,
    /// Never sleep (burn the core for the lowest latency).
    pub busy_poll: bool,
    /// While the arbiter waits on the CPU (for the link, or for T_w when
    /// idle), yield between rounds instead of spinning, so threads that
    /// share its core (clients, other processes) run meanwhile instead of
    /// waiting for its time slice to end. Alone on its core a yield
    /// returns at once. Default: on.
    pub yield_when_idle: bool,
    /// Dispatcher threads; 0 = the arbiter transmits cleared packets itself
    /// (or hands them back to their clients: `client_transmit`).
    pub dispatchers: usize,
    /// With 0 dispatchers: hand every cleared packet back to the client
    /// that sent it (through a return mailbox per client, capacity
    /// `tx_capacity`), which transmits it itself — the userspace PSPAT
    /// arrangement. Clients collect them with
    /// [`Client::take_cleared`](crate::client::Client::take_cleared).
    pub client_transmit: bool,
    /// Capacity of each dispatcher's TX mailbox.
    pub tx_capacity: usize,
    /// Pin the arbiter to this core.
    pub arbiter_core: Option<usize>,
    /// Pin dispatcher `i` to `dispatcher_cores[i % len]`.
    pub dispatcher_cores: Vec<usize>,
    /// Nice value of the arbiter thread (-20..=19; `None`: inherited). A
    /// negative value needs `CAP_SYS_NICE`; refused, the thread keeps its
    /// nice value (best effort, like pinning). The arbiter moves every
    /// client's packets: when it shares its core with runnable threads,
    /// the kernel gives it a share by weight, and one thread among many
    /// gets a sliver; a lower nice value raises its weight, so it keeps
    /// up, while it still sleeps when idle.
    pub arbiter_nice: Option<i32>,
    /// Scheduling policy of the arbiter thread: the normal time-sharing
    /// policy (with `arbiter_nice`), or `SCHED_FIFO` at a priority, as
    /// PSPAT's arbiter is a dedicated kernel thread that no client
    /// preempts. Unlike `arbiter_nice` it is not best effort: without
    /// `CAP_SYS_NICE` (or an `RLIMIT_RTPRIO` that allows the priority)
    /// [`Pspat::start`](crate::driver::Pspat::start) refuses it with
    /// [`RuntimeError::Sched`]. Under `SCHED_FIFO` a yield lets only
    /// real-time threads run, so waiting on the CPU holds the core
    /// against every client on it; and the kernel throttles real-time
    /// threads that run 95 % of a second (`sched_rt_runtime_us`), so
    /// an arbiter that never sleeps stops for ~50 ms each second. Pair
    /// it with the nap (`nap_cover`). Default: [`ArbiterSched::Other`].
    pub arbiter_sched: ArbiterSched,
    /// Bytes the emulated link may run ahead of the clock (HTB's `burst`):
    /// a packet is released when the link will be free within the time
    /// these bytes take. 0 (the default): never early. The long-run rate is
    /// exact either way; a lead saves the arbiter a wake-up per packet.
    pub burst: u32,
    /// Hand-off: a client whose send finds that no arbiter round started
    /// within this time (the arbiter thread waits for a core, or sleeps)
    /// runs the round itself, if no one else is running one (see
    /// `handoff`). `None` (the default): clients run rounds only while
    /// the arbiter thread has stepped aside (`step_aside`). On
    /// this project's 2-vCPU machine 2 µs cost 30–45 % of the decisions
    /// per second at 1–64 clients (BENCHMARKS.md), so it is opt-in.
    pub assist_after: Option<Duration>,
    /// Starved assist: a client whose own sends show that it lost its core
    /// (a gap over `client::STARVED_GAP` in back-to-back sends) runs a
    /// round itself when none started within `client::AWAY_AFTER` (or
    /// `assist_after`, if shorter), even while the arbiter thread is
    /// present and without `assist_after`: on a busy core the arbiter is
    /// likely off its core too. Needs no clock read of its own (the gaps
    /// are those the client already measures). `false` (the default):
    /// starved gaps are only counted.
    pub starved_assist: bool,
    /// Nap: when no mailbox holds a packet and the scheduler's backlog
    /// keeps the emulated link busy for at least this long, the arbiter
    /// thread sleeps for half of that link time, at most this long (a
    /// client's ring wakes it; not while released packets wait for a
    /// dispatcher)
    /// instead of waiting on the CPU for every departure; on waking, the
    /// link catches up (every packet that would have started meanwhile is
    /// released), so no link time is lost while the backlog lasts. An
    /// arbiter that is always runnable holds its core even while it only
    /// waits for the link; napping leaves the core to the clients (which
    /// then refill the mailboxes) when it does not have one to itself.
    /// `None` (the default): never nap (wait on the CPU as
    /// `yield_when_idle` says). Opt-in: on this project's 2-vCPU machine
    /// 200 µs did not raise what a client sharing its core with a busy
    /// process delivers and raised the victim's p99 at one client
    /// (BENCHMARKS.md, PSPAT section).
    pub nap_cover: Option<Duration>,
    /// Nap only while the arbiter thread lacks a core (threaded runtime,
    /// with `nap_cover`): the nap opens for 16 ms to 1 s after a window
    /// of about a millisecond in which the thread was runnable but not
    /// running for at least 25 % of its awake time, and stays open while
    /// that share stays at 5 % or more. A thread that yields once per
    /// departure on a shared core is picked after the other threads even
    /// at nice −20, and the victim's packets wait in their mailbox; one
    /// that sleeps is woken by a ring at once. Alone on its core a nap
    /// only adds a wake-up, so the gate keeps it shut. See
    /// `driver::nap_gate`. `false` (the default): `nap_cover` alone
    /// decides.
    pub nap_when_waiting: bool,
    /// Step aside (threaded runtime): when the arbiter thread waits for a
    /// core, or sending clients lose theirs, for at least 30 % of a
    /// millisecond's window, the thread sleeps for an away period (2 to
    /// 32 ms) and sending clients run the rounds under the hand-off lock,
    /// backlogged or not; it keeps doing so while that serves more than
    /// 0.95× the decisions per second of its own rounds, and otherwise
    /// holds off for a doubling time (8 ms to 1 s); an away period ends
    /// early once no round has started for 0.5 ms. See
    /// `driver::step_aside`. `false` (the default): the arbiter thread
    /// runs every round it gets a core for. Off by default because on an
    /// idle two-core machine it cost decisions per second at one client
    /// (median 11.4 against 16.2 M/s, five interleaved pairs), while with
    /// a busy process on one core it raised what one client delivers from
    /// a median 0.49× to 0.61× the locked baseline (BENCHMARKS.md).
    pub step_aside: bool,
    /// Humble (threaded runtime, with an `arbiter_nice` below the nice
    /// value the thread inherits, under the normal policy): when sending
    /// clients lose their cores for at least 30 % of a millisecond's
    /// window while the arbiter thread had its core (waited for one less
    /// than 20 % of it) and spent less than half of it in rounds that
    /// move packets, the thread goes back to its inherited
    /// nice value for a humble period (16 ms to 1 s) and keeps running
    /// the rounds: at nice −20 an always-runnable arbiter counts as some
    /// eighty threads in the kernel's load balance, which then keeps
    /// every client off its core, and draws its task group's weight to
    /// its core, away from the clients on the others. Kept (and doubled) while a period serves more
    /// than 0.95× the decisions per second of the window that triggered
    /// it; otherwise the priority is raised again for a doubling hold-off
    /// (32 ms to 1 s). See `driver::humble`. `false` (the default): the
    /// thread keeps `arbiter_nice` throughout.
    pub humble: bool,
}

impl Config {
    /// Defaults for a link of rate `link`.
    pub fn new(link: Rate) -> Config {
        Config {
            link,
            scan_interval: Duration::ZERO,
            read_interval: Duration::from_micros(1),
            round_cap: 512,
            read_batch: 64,
            mailbox_capacity: 512,
            max_clients: 128,
            trim_after: 2,
            settle_interval: Duration::from_millis(1),
            spin: Duration::from_micros(100),
            busy_poll: false,
            yield_when_idle: true,
            dispatchers: 0,
            client_transmit: false,
            tx_capacity: 1024,
            arbiter_core: None,
            dispatcher_cores: Vec::new(),
            arbiter_nice: None,
            arbiter_sched: ArbiterSched::Other,
            burst: 0,
            assist_after: None,
            starved_assist: false,
            nap_cover: None,
            nap_when_waiting: false,
            step_aside: false,
            humble: false,
        }
    }

    /// Checks the parameters; the error names the field and what is allowed.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        let bad = |field: &'static str, value: String, allowed: &'static str| {
            Err(RuntimeError::Config {
                field,
                value,
                allowed,
            })
        };
        if self.round_cap == 0 || self.round_cap > 1 << 20 {
            return bad("round_cap", self.round_cap.to_string(), "1..=1048576");
        }
        if self.read_batch == 0 || self.read_batch > 1 << 20 {
            return bad("read_batch", self.read_batch.to_string(), "1..=1048576");
        }
        if self.mailbox_capacity == 0 || self.mailbox_capacity > 1 << 24 {
            return bad(
                "mailbox_capacity",
                self.mailbox_capacity.to_string(),
                "1..=16777216",
            );
        }
        if self.max_clients == 0 || self.max_clients > 4096 {
            return bad("max_clients", self.max_clients.to_string(), "1..=4096");
        }
        if self.trim_after == 0 {
            return bad("trim_after", "0".into(), "at least 1");
        }
        if self.dispatchers > 64 {
            return bad("dispatchers", self.dispatchers.to_string(), "0..=64");
        }
        if self.client_transmit && self.dispatchers > 0 {
            return bad(
                "dispatchers",
                self.dispatchers.to_string(),
                "0 when client_transmit is set (clients transmit themselves)",
            );
        }
        if let Some(n) = self.arbiter_nice
            && !(-20..=19).contains(&n)
        {
            return bad("arbiter_nice", n.to_string(), "-20..=19");
        }
        if let ArbiterSched::Fifo(p) = self.arbiter_sched
            && !(1..=99).contains(&p)
        {
            return bad(
                "arbiter_sched",
                self.arbiter_sched.to_string(),
                "fifo:1..=99",
            );
        }
        if self.burst > 1 << 24 {
            return bad("burst", self.burst.to_string(), "0..=16777216 bytes");
        }
        if self.tx_capacity == 0 || self.tx_capacity > 1 << 24 {
            return bad("tx_capacity", self.tx_capacity.to_string(), "1..=16777216");
        }
        if self.scan_interval > Duration::from_secs(1) {
            return bad(
                "scan_interval",
                format!("{:?}", self.scan_interval),
                "at most 1s",
            );
        }
        if self.settle_interval > Duration::from_secs(1) {
            return bad(
                "settle_interval",
                format!("{:?}", self.settle_interval),
                "at most 1s",
            );
        }
        if let Some(d) = self.assist_after
            && d > Duration::from_secs(1)
        {
            return bad("assist_after", format!("{d:?}"), "at most 1s, or None");
        }
        if let Some(d) = self.nap_cover
            && (d.is_zero() || d > Duration::from_secs(1))
        {
            return bad(
                "nap_cover",
                format!("{d:?}"),
                "above 0 and at most 1s, or None",
            );
        }
        if self.nap_when_waiting && self.nap_cover.is_none() {
            return bad(
                "nap_when_waiting",
                "true".to_string(),
                "true only with a nap_cover (it gates the nap); false",
            );
        }
        if self.read_interval > Duration::from_secs(1) {
            return bad(
                "read_interval",
                format!("{:?}", self.read_interval),
                "at most 1s",
            );
        }
        Ok(())
    }
}

/// The arbiter thread's scheduling policy ([`Config::arbiter_sched`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ArbiterSched {
    /// The normal time-sharing policy (`SCHED_OTHER`), at
    /// [`Config::arbiter_nice`].
    #[default]
    Other,
    /// `SCHED_FIFO` at this priority (1..=99).
    Fifo(u8),
}

impl std::fmt::Display for ArbiterSched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArbiterSched::Other => f.write_str("other"),
            ArbiterSched::Fifo(p) => write!(f, "fifo:{p}"),
        }
    }
}

impl std::str::FromStr for ArbiterSched {
    type Err = String;
    /// `other`, or `fifo:N` with N in 1..=99; the error says what was
    /// wrong and what is allowed.
    fn from_str(s: &str) -> Result<Self, String> {
        let allowed = "allowed: other, or fifo:N with N in 1..=99";
        if s == "other" {
            return Ok(ArbiterSched::Other);
        }
        let Some(n) = s.strip_prefix("fifo:") else {
            return Err(format!("`{s}` is not a policy; {allowed}"));
        };
        match n.parse::<i64>() {
            Ok(p) if (1..=99).contains(&p) => Ok(ArbiterSched::Fifo(p as u8)),
            Ok(_) => Err(format!("`{s}`: priority `{n}` is out of range; {allowed}")),
            Err(_) => Err(format!(
                "`{s}`: priority `{n}` is not a whole number; {allowed}"
            )),
        }
    }
}

/// Errors of the runtime's API.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RuntimeError {
    /// A configuration value is out of range.
    #[error("invalid runtime setting `{field}` = {value}; allowed: {allowed}")]
    Config {
        /// Field name.
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: &'static str,
    },
    /// All client slots are taken.
    #[error("too many clients: at most {max} (raise `max_clients`)")]
    TooManyClients {
        /// The limit.
        max: usize,
    },
    /// The number of outputs does not match the dispatchers.
    #[error("{given} outputs given for {dispatchers} dispatchers; need {need}")]
    Outputs {
        /// Outputs given.
        given: usize,
        /// Dispatchers configured.
        dispatchers: usize,
        /// Outputs needed (dispatchers, or 1 with none, or 0 when clients
        /// transmit).
        need: usize,
    },
    /// The arbiter thread may not run under the configured policy.
    #[error(
        "the arbiter thread may not run under {policy}: {reason}; a real-time policy needs CAP_SYS_NICE (or an RLIMIT_RTPRIO that allows the priority), or use `other`"
    )]
    Sched {
        /// The policy asked for.
        policy: ArbiterSched,
        /// What the kernel answered.
        reason: String,
    },
    /// The runtime was stopped.
    #[error("the runtime is stopped")]
    Stopped,
    /// A runtime thread could not be started or panicked.
    #[error("runtime thread failed: {0}")]
    Thread(String),
}

/// What stop ([`Pspat::stop`](crate::driver::Pspat::stop),
/// [`Arbiter::stop`](crate::arbiter::Arbiter::stop),
/// [`Locked::stop`](crate::locked::Locked::stop)) does with packets still
/// queued in the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopMode {
    /// Transmit them at once, ignoring the link rate.
    Drain,
    /// Hand them back in [`Report::returned`](crate::report::Report::returned).
    Return,
}

/// What a send did with an accepted packet: the answer of
/// [`Client::send`](crate::client::Client::send) and of the locked
/// baseline's [`LockedClient::send`](crate::locked::LockedClient::send).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// Queued in the mailbox.
    Queued,
    /// Queued, and since the previous send the scheduler dropped at least
    /// one of this client's packets: slow down (like `NET_XMIT_CN`).
    Backpressure,
}

/// A monotonic clock in nanoseconds since its creation; copies share the
/// epoch, so timestamps from clients and outputs compare.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    epoch: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Clock {
        Clock {
            epoch: Instant::now(),
        }
    }
    /// Nanoseconds since the epoch.
    #[inline]
    pub fn now(&self) -> Nanos {
        Nanos(u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// Adds `n` flows of weight `weights[i % len]` (default config otherwise),
/// returning their ids — a helper for benches and tests.
pub fn add_flows<T>(
    sched: &mut dyn Scheduler<T>,
    weights: &[u32],
    n: usize,
    limit: u32,
) -> Result<Vec<FlowId>, pktsched_core::ConfigError> {
    (0..n)
        .map(|i| {
            let w = weights.get(i % weights.len().max(1)).copied().unwrap_or(1);
            sched.add_flow(FlowConfig::weight(w).with_limit(limit))
        })
        .collect()
}

/// CPU time of the calling thread, ns (first field of Linux
/// `/proc/thread-self/schedstat`; `None` elsewhere). Unlike wall time it
/// does not count time the thread waited for a core while other processes
/// ran (the machines these figures come from are shared). Used by every
/// `pktsched` benchmark.
pub fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// `d` in whole nanoseconds (saturating).
pub(crate) fn dur_nanos(d: Duration) -> Nanos {
    Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::thread_cpu_ns;

    #[test]
    #[cfg(target_os = "linux")]
    #[cfg_attr(miri, ignore = "reads /proc")]
    fn thread_cpu_time_is_read_and_does_not_go_back() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..100_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let b = thread_cpu_ns();
        assert!(a.is_some() && b.is_some(), "{a:?} {b:?}");
        assert!(b >= a, "{a:?} then {b:?}");
    }
}
